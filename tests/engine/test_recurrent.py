"""Recurrent (state-space) models: their cache cannot be rolled back token by token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS, run
from tests.helpers.tiny_recurrent import write_tiny_mamba


@pytest.fixture(scope="module")
def mamba_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpeculativeDecoder]:
    folder = tmp_path_factory.mktemp("mamba")
    target_path = write_tiny_mamba(folder / "target.gguf", seed=1)
    # Another seed over the same vocabulary: a draft the target often rejects.
    draft_path = write_tiny_mamba(folder / "draft.gguf", seed=2)
    with (
        LlamaModel(target_path, n_ctx=512, n_threads=1) as target,
        LlamaModel(draft_path, n_ctx=512, n_threads=1) as draft,
    ):
        yield SpeculativeDecoder(target, draft)


@pytest.mark.parametrize("mode", ["draft", "lookup", "auto"])
def test_greedy_output_on_a_recurrent_model_is_plain_output(
    mamba_pair: SpeculativeDecoder, mode: str
) -> None:
    for text in CHAT_PROMPTS:
        prompt = mamba_pair.target.tokenize(text)
        plain = run(mamba_pair, prompt, mode="plain", max_tokens=40)
        spec = run(mamba_pair, prompt, mode=mode, k=3, max_tokens=40)
        assert spec.tokens == plain.tokens, f"{mode} diverged on {text!r}"
        # The target's cache holds the whole context after the answer, never a restart.
        assert mamba_pair.target.tokens == [*prompt, *spec.tokens][: mamba_pair.target.n_past]
        assert mamba_pair.target.n_past >= len(prompt)
        # Drafting is refused, with the reason, rather than paid for by re-reading the context.
        assert all(r.drafted == 0 for r in spec.rounds)
        reasons = {r.choice.reason for r in spec.rounds}
        assert any("cannot drop rejected drafts" in reason for reason in reasons), reasons


def test_a_recurrent_draft_is_left_unused_and_lookup_still_drafts(
    mamba_pair: SpeculativeDecoder, tiny_models: TinyModels
) -> None:
    with LlamaModel(tiny_models.target, n_ctx=512, n_threads=1) as target:
        decoder = SpeculativeDecoder(target, mamba_pair.target)
        assert "draft model" in decoder.drafting_refused
        prompt = target.tokenize(CHAT_PROMPTS[1])
        plain = run(decoder, prompt, mode="plain", max_tokens=60)
        spec = run(decoder, prompt, mode="draft", k=3, max_tokens=60)
        assert spec.tokens == plain.tokens
        assert spec.rounds[-1].stats.drafted > 0  # prompt lookup took the draft model's place
