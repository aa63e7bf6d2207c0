"""Tests for the round loop: exact output, accounting, rollback, stops, live controls."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from specchat.engine.costs.priors import SAMPLED_DECAY, SAMPLED_PRIOR_WEIGHT
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting import PromptLookupDrafter
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import ContextFullError, LlamaModel
from specchat.engine.types import (
    Controls,
    GenerationRequest,
    SamplingParams,
    StopReason,
    TokenKind,
)
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS, run

SPECULATIVE_MODES = ["lookup", "draft", "chain", "suffix", "auto"]


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("mode", SPECULATIVE_MODES)
def test_greedy_speculation_is_token_for_token_plain(
    decoder: SpeculativeDecoder, mode: str, k: int
) -> None:
    for text in CHAT_PROMPTS:
        prompt = decoder.target.tokenize(text)
        plain = run(decoder, prompt, mode="plain", max_tokens=120)
        spec = run(decoder, prompt, mode=mode, k=k, max_tokens=120)
        assert spec.tokens == plain.tokens, f"{mode} K={k} diverged on {text!r}"
        assert spec.text == plain.text


def test_plain_reads_the_target_rows_in_place_and_matches_a_copying_argmax_loop(
    decoder: SpeculativeDecoder,
) -> None:
    """Plain rounds verify on llama.cpp's own logits (no copy): the answer is still the
    argmax of each row copied out one token at a time."""
    target = decoder.target
    assert isinstance(target, LlamaModel)
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=40)
    target.reset()
    target.decode(prompt[:-1], logits="none")
    tokens, last = [], prompt[-1]
    while len(tokens) < len(plain.tokens):
        last = int(np.argmax(target.decode([last], logits="all")[0]))
        tokens.append(last)
    assert tokens == plain.tokens
    lent = target.decode([last], logits="all", copy=False)
    assert not lent.flags.owndata  # llama.cpp's rows, lent until the next decode


def test_speculation_really_drafts(decoder: SpeculativeDecoder) -> None:
    """Identity above would be vacuous if nothing were ever drafted or accepted."""
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    for mode in ("draft", "lookup"):
        result = run(decoder, prompt, mode=mode, k=3, max_tokens=120)
        stats = result.rounds[-1].stats
        assert stats.drafted > 0 and stats.accepted > 0, mode
        kinds = {e.kind for e in result.events}
        assert TokenKind.ACCEPTED in kinds and TokenKind.CORRECTED in kinds, mode


def test_event_accounting_matches_stats(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    result = run(decoder, prompt, mode="chain", k=4, max_tokens=150)
    kinds = Counter(e.kind for e in result.events)
    stats = result.rounds[-1].stats
    assert sum(kinds.values()) == len(result.tokens) == stats.emitted
    drafted = sum(r.drafted for r in result.rounds)
    accepted = sum(1 for e in result.events if e.kind == TokenKind.ACCEPTED)
    passes = sum(1 for r in result.rounds if r.events or r.drafted)
    assert stats.drafted == drafted
    assert stats.accepted == accepted == kinds[TokenKind.ACCEPTED]
    assert stats.alpha == pytest.approx(accepted / drafted)
    assert stats.tau == pytest.approx(len(result.tokens) / passes)
    assert sum(stats.position_accepted) == accepted
    assert sum(stats.position_drafted) == drafted
    for r in result.rounds:
        if r.drafted:
            # Every round with drafts ends with exactly one target token.
            assert r.events[-1].kind in (TokenKind.CORRECTED, TokenKind.BONUS) or r.stop
            assert len(r.rejected) == r.drafted - r.accepted or r.stop


def test_caches_hold_the_accepted_context_after_rejections(
    decoder: SpeculativeDecoder, tiny_models: TinyModels
) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    result = run(decoder, prompt, mode="draft", k=8, max_tokens=40)
    assert any(r.rejected for r in result.rounds)
    context = [*prompt, *result.tokens]
    assert decoder.target.tokens == context[:-1]
    after = decoder.target.decode([context[-1]], logits="last")[0]
    with LlamaModel(tiny_models.target, n_ctx=1024) as fresh:
        reference = fresh.decode(context, logits="last")[0]
        fresh.reset()
        # What a cache still holding one rejected token would give instead.
        polluted = fresh.decode(
            [
                *context[:-1],
                result.rounds[0].rejected[0] if result.rounds[0].rejected else 1,
                context[-1],
            ],
            logits="last",
        )[0]
    # Batch shapes differ between the two paths, so only float noise may separate them;
    # a cache left holding a rejected token is off by whole units.
    np.testing.assert_allclose(after, reference, atol=0.05)
    assert np.abs(polluted - reference).max() > 0.5


def test_text_is_utf8_safe(decoder: SpeculativeDecoder) -> None:
    # Random byte-level models emit split multi-byte characters all the time.
    prompt = decoder.target.tokenize("héllo wörld ✓ ")
    result = run(decoder, prompt, mode="lookup", k=4, max_tokens=200)
    whole = b"".join(decoder.target.piece(t) for t in result.tokens)
    assert result.text == whole.decode("utf-8", errors="replace")
    assert any(e.text == "" for e in result.events), "expected some token ending mid-character"


def test_cancel_then_generate_again_matches_a_fresh_run(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    fresh = run(decoder, prompt, mode="draft", k=3, max_tokens=80)
    cancel = threading.Event()
    request = GenerationRequest(tuple(prompt), 80, Controls("draft", 3))
    rounds = []
    for result in decoder.generate(request, cancel=cancel):
        rounds.append(result)
        if len(rounds) == 5:
            cancel.set()
    assert rounds[-1].stop == StopReason.CANCELLED
    again = run(decoder, prompt, mode="draft", k=3, max_tokens=80)
    assert again.tokens == fresh.tokens


def test_k_and_temperature_change_between_rounds(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    request = GenerationRequest(
        tuple(prompt), 60, Controls("draft", 2, SamplingParams(temperature=0.0))
    )
    generation = decoder.generate(request)
    seen = []
    lookup = decoder.drafters["lookup"]
    assert isinstance(lookup, PromptLookupDrafter)
    results = []
    for result in generation:
        results.append(result)
        seen.append((result.choice.k, result.temperature))
        # The copying drafters are told whether rounds sample (a copy's match then counts
        # only what the answer wrote).
        assert lookup.copies.sampled == (result.temperature > 0)
        if result.index == 3:
            generation.steer(Controls("draft", 5, SamplingParams(temperature=0.7, seed=1)))
            assert generation.controls.k == 5 and generation.request.controls.k == 2
    assert seen[0] == (2, 0.0)
    assert seen[4][1] == 0.7
    assert all(k <= 5 for k, _ in seen[4:]) and any(k == 5 for k, _ in seen[4:])
    # And each round tells them how likely the tokens it wrote were, which caps a copy's
    # acceptance when sampling (CopyAcceptance.ceiling): the sampled rounds' tokens only.
    total = count = 0.0
    for result in results:
        for event in result.events if result.temperature > 0 else ():
            total, count = total * SAMPLED_DECAY + event.p_target, count * SAMPLED_DECAY + 1
    ceiling = (SAMPLED_PRIOR_WEIGHT + total) / (SAMPLED_PRIOR_WEIGHT + count)
    assert count > 10 and lookup.copies.ceiling == pytest.approx(ceiling, abs=1e-12)
    assert ceiling < 1.0


def test_max_tokens_and_stop_strings(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[2])
    limited = run(decoder, prompt, mode="lookup", k=8, max_tokens=17)
    assert len(limited.tokens) == 17
    assert limited.rounds[-1].stop == StopReason.MAX_TOKENS
    full = run(decoder, prompt, mode="plain", max_tokens=80)
    stop = full.text[30:33]
    cut = run(decoder, prompt, mode="draft", k=4, max_tokens=80, stop_strings=[stop])
    assert cut.rounds[-1].stop == StopReason.STOP_STRING
    assert cut.text == full.text[: full.text.index(stop)]


def test_full_context_stops_cleanly(tiny_models: TinyModels) -> None:
    with (
        LlamaModel(tiny_models.target, n_ctx=64) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=64) as draft,
    ):
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
        prompt = target.tokenize("the cat sat on the mat")
        result = run(decoder, prompt, mode="draft", k=8, max_tokens=5000)
        assert result.rounds[-1].stop == StopReason.CONTEXT_FULL
        assert len(prompt) + len(result.tokens) == target.n_ctx + 1  # last one not cached
        with pytest.raises(ContextFullError, match="does not fit"):
            run(decoder, [40 + i % 200 for i in range(target.n_ctx + 5)], mode="plain")


def test_auto_reports_what_it_chose(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    result = run(decoder, prompt, mode="auto", max_tokens=100)
    choices = {r.choice.mode for r in result.rounds}
    assert "auto" not in choices
    assert all(r.choice.reason for r in result.rounds)
    assert choices & {"plain", "lookup", "draft"}


def test_stop_string_spanning_rounds_is_never_shown(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    full = run(decoder, prompt, mode="plain", max_tokens=120)
    for start in range(10, 100, 7):
        stop = full.text[start : start + 4]
        if not stop.strip() or "\ufffd" in stop:
            continue
        for mode in ("plain", "draft"):
            cut = run(decoder, prompt, mode=mode, k=3, max_tokens=120, stop_strings=[stop])
            assert cut.rounds[-1].stop == StopReason.STOP_STRING
            assert cut.text == full.text[: full.text.index(stop)], (mode, stop)
            assert sum(len(r.events) for r in cut.rounds) == cut.rounds[-1].stats.emitted


def test_auto_evaluates_the_prompt_in_the_draft_model_only_where_it_expects_to_draft(
    tiny_models: TinyModels,
) -> None:
    """The first token never waits for a draft model `auto` does not expect to use: not
    before the target's cost is known, not where the costs say plain wins (a CPU); where
    they say it pays (a GPU), the prompt is evaluated up front."""
    from specchat.bench.hindsight.replay import read_costs

    with (
        LlamaModel(tiny_models.target, n_ctx=512) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=512) as draft,
    ):
        prompt = target.tokenize(CHAT_PROMPTS[0])
        readied = {}
        for costs in ("none", "cpu", "gpu"):
            decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
            if costs != "none":
                decoder.auto.costs = read_costs(costs)
            draft.truncate(0)
            run(decoder, prompt, mode="auto", max_tokens=1)
            readied[costs] = draft.n_past
        assert readied == {"none": 0, "cpu": 0, "gpu": len(prompt) - 1}
