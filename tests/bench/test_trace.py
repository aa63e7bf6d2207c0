"""Answer traces: every drafter's proposal at every position, as verification would read it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from specchat.bench.live.trace import AnswerTrace, record_trace
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting import DraftModelDrafter, PromptLookupDrafter
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import run


@pytest.fixture(scope="module")
def pair(tiny_models: TinyModels) -> Iterator[tuple[LlamaModel, LlamaModel]]:
    target = LlamaModel(tiny_models.target, n_ctx=512)
    draft = LlamaModel(tiny_models.draft_close, n_ctx=512)
    yield target, draft
    target.close()
    draft.close()


def test_trace_matches_drafting_live_at_every_position(
    pair: tuple[LlamaModel, LlamaModel],
) -> None:
    target, draft = pair
    prompt = target.tokenize("the cat sat on the mat, the cat sat on the hat, the cat")
    answer = run(
        SpeculativeDecoder(LoadedPair.of(target, None)), prompt, mode="plain", max_tokens=40
    )
    trace = record_trace("p", prompt, answer.tokens, draft_model=draft)
    assert trace.answer == tuple(answer.tokens) and trace.draft is not None
    from specchat.bench.hindsight.replay import read_costs
    from specchat.engine.drafting.draft_model.draft_model_column import RecordedModel

    lookup, drafter = PromptLookupDrafter(), DraftModelDrafter(draft, min_confidence=0.0)
    # The draft model as it runs (its confidence stop on), and as replay predicts it.
    # (At the recorded confidences' median, so that the stop falls inside kept runs.)
    assert trace.draft_confidence is not None
    threshold = float(np.median(trace.draft_confidence))
    stopping = DraftModelDrafter(draft, min_confidence=threshold)
    # Replay runs the real drafter on the draft model as recorded.
    recorded = DraftModelDrafter(
        RecordedModel(trace, read_costs("gpu")),  # type: ignore[arg-type]
        min_confidence=threshold,
    )
    stops = stops_past_miss = 0
    rng = np.random.default_rng(0)
    kept_somewhere = False
    for i in range(len(answer.tokens)):
        context = [*prompt, *answer.tokens[:i]]
        proposal, match = lookup.find(context, 64)
        assert trace.lookup_len[i] == len(proposal) and trace.match_len[i] == match
        assert proposal[: len(trace.lookup[i])] == trace.lookup[i]
        live = drafter.propose(context, 16, SamplingParams(), rng).tokens
        # Recorded as far as greedy verification reads it: the kept run, then one refusal.
        assert live[: len(trace.draft[i])] == trace.draft[i]
        assert trace.draft_kept(i) == next(
            (j for j, (a, b) in enumerate(zip(live, answer.tokens[i:], strict=False)) if a != b),
            min(len(live), len(answer.tokens) - i),
        )
        kept_somewhere |= trace.draft_kept(i) > 0
        # A round drafts no further than the answer's budget (past it nothing is recorded).
        k = min(16, len(answer.tokens) - i)
        stopped = len(stopping.propose(context, k, SamplingParams(), rng).tokens)
        replayed = recorded.propose(context, k, SamplingParams(), rng).tokens
        common = min(len(replayed), len(trace.draft[i]))
        assert replayed[:common] == trace.draft[i][:common]
        predicted = len(replayed)
        # The trace holds the confidence past the draft's miss as well as before it.
        assert stopped == predicted
        stops += predicted < k
        stops_past_miss += trace.draft_kept(i) + 1 < predicted < k
    assert kept_somewhere  # the close draft agrees often: the test exercises kept runs
    assert stops > 0  # and the confidence stop ends some drafts inside a kept run
    assert stops_past_miss > 0  # and some a few tokens past its miss
    assert AnswerTrace.from_json(trace.to_json()) == trace


def test_a_malformed_trace_is_refused() -> None:
    row = AnswerTrace(
        "p", (1,), (2, 3), lookup=((2,), (3,)), lookup_len=(1, 1), match_len=(1, 1)
    ).to_json()
    row["match_len"] = [1]
    with pytest.raises(ValueError, match="different lengths"):
        AnswerTrace.from_json(row)
