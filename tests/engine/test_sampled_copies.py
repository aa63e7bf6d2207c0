"""When sampling, a copy's match counts only what this answer wrote: an identical prompt says
nothing about which sample will be drawn."""

from __future__ import annotations

from collections.abc import Sequence

from specchat.engine.drafting import Draft, Outcome, PromptLookupDrafter, SuffixDrafter
from specchat.engine.drafting.base import Drafter
from specchat.engine.drafting.copy_acceptance import CopyAcceptance
from specchat.engine.schedule import AutoPolicy
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
    offer = drafter.offer(context, 64)
    assert offer is not None  # the earlier answer is there to copy
    return policy.choose([(drafter, offer)])


def _ready(drafter: Drafter, sampling: SamplingParams) -> Drafter:
    drafter.use_sampling(sampling)
    drafter.prepare(PROMPT, eager=True)
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


def test_a_sampled_answer_that_follows_its_source_earns_the_copy_back() -> None:
    drafter = _ready(SuffixDrafter(), SAMPLED)
    context = list(PROMPT)
    for token in EARLIER_ANSWER[:24]:  # the new sample happens to follow the earlier answer
        drafter.offer(context, 64)
        context.append(token)
        drafter.observe(Outcome(context, NO_DRAFT, 0))
    choice = _choose(drafter, context)
    assert choice.mode == "suffix" and choice.k >= 8, choice


def test_the_drafters_are_told_when_sampling_changes() -> None:
    drafter = SuffixDrafter()
    drafter.use_sampling(SAMPLED)
    assert drafter.copies.sampled
    drafter.use_sampling(GREEDY)
    assert not drafter.copies.sampled
