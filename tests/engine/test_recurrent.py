"""Recurrent (state-space) models speculate: rejected drafts are taken back from a
checkpoint of their state (Mamba has no llama.cpp snapshots)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
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
        yield SpeculativeDecoder(LoadedPair.of(target, draft))


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
        reasons = {r.choice.reason for r in spec.rounds}
        assert not any("cannot drop rejected drafts" in reason for reason in reasons), reasons
        if mode == "draft":
            assert sum(r.drafted for r in spec.rounds) > 0


def test_a_recurrent_draft_model_drafts_for_a_transformer(
    mamba_pair: SpeculativeDecoder, tiny_models: TinyModels
) -> None:
    with LlamaModel(tiny_models.target, n_ctx=512, n_threads=1) as target:
        decoder = SpeculativeDecoder(LoadedPair.of(target, mamba_pair.target))
        assert decoder.drafting_refused == ""
        assert "draft" in decoder.drafters.names()
        prompt = target.tokenize(CHAT_PROMPTS[1])
        plain = run(decoder, prompt, mode="plain", max_tokens=60)
        spec = run(decoder, prompt, mode="draft", k=3, max_tokens=60)
        assert spec.tokens == plain.tokens
        assert any(r.drafted and r.choice.mode == "draft" for r in spec.rounds)
