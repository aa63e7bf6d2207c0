"""SpecChat against what a user would run instead, in the same bench run: llama.cpp's own
llama-server (plain, its default speculation, draft-simple, the pair's heads) and
llama-cpp-python's `Llama` (plain and with prompt-lookup decoding), on the same model files,
prompts, threads, context and KV cache (issue 50). `specchat bench --peers` runs them."""
