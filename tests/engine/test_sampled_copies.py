"""When sampling, a copy's match counts only what this answer wrote: an identical prompt says
nothing about which sample will be drawn."""

from __future__ import annotations

from collections.abc import Sequence

from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import Draft, Outcome, PromptLookupDrafter, SuffixDrafter
from specchat.engine.drafting.base import Answer, Drafter
from specchat.engine.drafting.copies.copy_acceptance import CopyAcceptance
from specchat.engine.types import PolicyChoice, SamplingParams
from tests.engine.test_lookup_learning import CPU_COSTS

GREEDY = SamplingParams()
SAMPLED = SamplingParams(temperature=0.8, seed=1)
NO_DRAFT = Draft((), None, 0.0, "plain")

QUESTION = list(range(1000, 1040))  # 40 tokens
EARLIER_ANSWER = list(range(2000, 2080))  # 80 tokens, what followed the question before
# The same question again, after the earlier exchange: a regenerate, or a question re-asked.
PROMPT = [*QUESTION, *EARLIER_ANSWER, *QUESTION]


def _choose(drafter: Drafter, context: Sequence[int]) -> PolicyChoice:
    policy = AutoPolicy()
    policy.costs.seed(CPU_COSTS)
    offer = drafter.offer(context, 64, None)
    assert offer is not None  # the earlier answer is there to copy
    return policy.choose([offer])


def _ready(drafter: Drafter, sampling: SamplingParams) -> Drafter:
    drafter.begin(Answer(prompt=PROMPT, sampling=sampling))
    drafter.ready(PROMPT)
    return drafter


def test_match_evidence_is_the_whole_match_at_t0_and_the_answers_part_when_sampling() -> None:
    copies = CopyAcceptance()
    copies.restart(100)  # a 100-token prompt
    assert copies.evidence(100, 40) == 40 and copies.evidence(110, 40) == 40
    copies.sampled = True
    assert copies.evidence(100, 40) == 0  # all of it is prompt
    assert copies.evidence(110, 40) == 10  # ten tokens of it this answer wrote
    assert copies.evidence(160, 40) == 40


def test_a_repeated_question_is_copied_from_the_first_token_only_at_t0() -> None:
    for make in (SuffixDrafter, PromptLookupDrafter):
        greedy = _choose(_ready(make(), GREEDY), PROMPT)
        assert greedy.mode == make.name and greedy.k >= 16, greedy
        sampled = _choose(_ready(make(), SAMPLED), PROMPT)
        assert sampled.mode == "plain", sampled


def _follow(drafter: Drafter, tokens: Sequence[int], p: float | None = None) -> list[int]:
    """The answer writes `tokens` (each at probability `p` under the sampling, if known)."""
    context = list(PROMPT)
    for token in tokens:
        drafter.offer(context, 64, None)
        context.append(token)
        drafter.observe(Outcome(context, NO_DRAFT, 0, None, () if p is None else (p,)))
    return context


def test_a_sampled_answer_that_follows_its_source_earns_the_copy_back() -> None:
    # The new sample happens to follow the earlier answer, writing tokens the target was
    # sure of: copying the rest is worth a long pass.
    for p in (None, 0.995):
        drafter = _ready(SuffixDrafter(), SAMPLED)
        choice = _choose(drafter, _follow(drafter, EARLIER_ANSWER[:24], p))
        assert choice.mode == "suffix" and choice.k >= 8, choice


def test_the_answers_sampled_probabilities_cap_a_copys_acceptance() -> None:
    """A copy of an earlier sample is kept per token at about the mean probability of the
    tokens the answer samples (Σ p²): a match earned on a lucky stretch of flat
    distributions is not priced as if the text were certain."""
    for make in (SuffixDrafter, PromptLookupDrafter):
        unsure = _ready(make(), SAMPLED)
        context = _follow(unsure, EARLIER_ANSWER[:24], 0.8)
        assert unsure.copies.ceiling < 0.85
        offer = unsure.offer(context, 64, None)
        assert offer is not None and offer.curve[-1] < 1.0 / (1.0 - 0.85)
        assert _choose(unsure, context).mode == "plain"
        # At temperature 0 the same probabilities change nothing: kept means top token.
        greedy = _ready(make(), GREEDY)
        context = _follow(greedy, EARLIER_ANSWER[:24], 0.8)
        assert greedy.copies.ceiling == 1.0
        sure = _ready(make(), GREEDY)
        offer, unchanged = (
            greedy.offer(context, 64, None),
            sure.offer(_follow(sure, EARLIER_ANSWER[:24]), 64, None),
        )
        assert offer is not None and unchanged is not None and offer.curve == unchanged.curve


def test_the_ceiling_is_a_decaying_mean_that_each_answer_starts_afresh() -> None:
    copies = CopyAcceptance()
    copies.restart(10)
    copies.learn(list(range(12)), None, (0.5, 0.5))
    assert copies.ceiling == 1.0  # greedy: no ceiling, nothing kept for later
    copies.sampled = True
    assert copies.ceiling == 1.0  # nothing sampled yet: the prior, a mean of 1
    copies.learn(list(range(14)), None, (0.5, 0.5))
    assert 0.5 < copies.ceiling < 1.0
    for n in range(300):
        copies.learn(list(range(15 + n)), None, (0.6,))
    # The earlier 0.5s are forgotten; about the last fifty tokens count, beside the prior.
    assert abs(copies.ceiling - (2.0 + 0.6 * 50) / (2.0 + 50)) < 0.002
    copies.restart(400)
    assert copies.ceiling == 1.0


def test_the_drafters_are_told_when_sampling_changes() -> None:
    drafter = SuffixDrafter()
    drafter.begin(Answer(prompt=PROMPT, sampling=SAMPLED))
    assert drafter.copies.sampled
    # In the middle of an answer: with the round's outcome.
    drafter.observe(Outcome([*PROMPT, 1], NO_DRAFT, 0, sampling=GREEDY))
    assert not drafter.copies.sampled
    drafter.observe(Outcome([*PROMPT, 1, 2], NO_DRAFT, 0))  # not said: unchanged
    assert not drafter.copies.sampled
    drafter.observe(Outcome([*PROMPT, 1, 2, 3], NO_DRAFT, 0, sampling=SAMPLED))
    assert drafter.copies.sampled
