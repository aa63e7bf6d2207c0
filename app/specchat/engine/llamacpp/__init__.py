"""llama.cpp through its low-level API: loading a model and its context, batched decoding
with KV rollback and tree passes, the process-wide backend, and the caches built on it (each
conversation's KV state on disk, recent prompts' caches in memory, a prompt read in
chunks)."""
