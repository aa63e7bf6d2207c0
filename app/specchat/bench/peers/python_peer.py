"""llama-cpp-python's own decoding as a bench peer: `Llama.generate` (the loop its
completions run) plain and with `LlamaPromptLookupDecoding`, on SpecChat's prompt tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import llama_cpp

from specchat.bench.peers.llama_server import ServerSettings

_KEY_TYPES = {"q8_0": llama_cpp.GGML_TYPE_Q8_0, "f16": llama_cpp.GGML_TYPE_F16}


@dataclass(frozen=True)
class PythonAnswer:
    """One answer of llama-cpp-python.

    Attributes:
        text: the answer (end-of-generation token excluded).
        tokens: tokens generated.
        token_ids: the tokens themselves.
        decode_s: from the first token to the last (the prompt's pass and the first token's
            sampling excluded, as llama-server's figure reads: see ChatReply.decode_tok_s).
    """

    text: str
    tokens: int
    decode_s: float
    token_ids: tuple[int, ...] = ()

    @property
    def decode_tok_s(self) -> float:
        return (self.tokens - 1) / self.decode_s if self.tokens > 1 and self.decode_s > 0 else 0.0


@contextmanager
def loaded(settings: ServerSettings, *, lookup: bool) -> Iterator[llama_cpp.Llama]:
    """The target as a user of llama-cpp-python would load it, with the bench's threads,
    context, batch and key type; flash attention on, as llama.cpp's `auto` (SpecChat's and
    llama-server's setting) picks on the backends it runs here."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    llm = llama_cpp.Llama(
        str(settings.target),
        n_ctx=settings.ctx,
        n_batch=settings.batch,
        n_ubatch=settings.batch,
        n_threads=settings.threads,
        n_threads_batch=settings.threads,
        n_gpu_layers=settings.gpu_layers,
        type_k=_KEY_TYPES.get(settings.key_type),
        flash_attn=True,
        draft_model=LlamaPromptLookupDecoding() if lookup else None,
        verbose=False,
    )
    try:
        yield llm
    finally:
        llm.close()


def answer(llm: llama_cpp.Llama, prompt: Sequence[int], *, max_tokens: int) -> PythonAnswer:
    """Greedy answer to `prompt` (its tokens), timed from outside."""
    out: list[int] = []
    first = last = time.perf_counter()
    for token in llm.generate(list(prompt), temp=0.0, top_k=1, top_p=1.0, min_p=0.0):
        now = time.perf_counter()
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            break
        if not out:
            first = now
        last = now
        out.append(token)
        if len(out) >= max_tokens:
            break
    text = llm.detokenize(out).decode("utf-8", "replace")
    return PythonAnswer(text, len(out), last - first, tuple(out))
