"""Copies are priced by match length and by how sure the target was of the token before."""

from __future__ import annotations

from specchat.engine.costs.priors import SURE_MARGIN
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import CopyAcceptance, Draft, Outcome, PromptLookupDrafter
from tests.helpers.engine import CHAT_PROMPTS, run

# A 2-core CPU running a Q4_0 target: a pass of 4 costs what a pass of 2 does.
Q4_0_COSTS = {1: 28.0, 2: 49.0, 4: 49.5, 8: 88.0, 16: 124.0}
NO_DRAFT = Draft((), None, 0.0, "plain")


def test_a_copy_after_a_sure_token_is_priced_above_one_after_a_hesitant_one() -> None:
    acceptance = CopyAcceptance()
    unknown = acceptance.estimate(3).alpha
    acceptance.learn([1, 2, 3], margin=SURE_MARGIN + 3.0)
    sure = acceptance.estimate(3).alpha
    acceptance.learn([1, 2, 3, 4], margin=SURE_MARGIN - 3.0)
    unsure = acceptance.estimate(3).alpha
    assert unsure < unknown < sure
    acceptance.learn([1, 2, 3, 4, 5], margin=None)  # not known: the pooled prior again
    assert acceptance.estimate(3).alpha == unknown


def test_a_proposal_is_scored_in_the_regime_it_was_made_in() -> None:
    acceptance = CopyAcceptance()
    acceptance.learn([7, 8], margin=0.5)  # the target hesitated over 8
    for _ in range(6):
        acceptance.note(2, (9, 9), match_len=3)
    hesitant_before = acceptance.estimate(3).alpha
    acceptance.learn([7, 8, 5], margin=SURE_MARGIN + 1.0)  # now sure; the copies were refused
    sure_after = acceptance.estimate(3).alpha
    acceptance.learn([7, 8, 5, 6], margin=0.5)
    assert acceptance.estimate(3).alpha < hesitant_before  # the refusals landed here
    fresh = CopyAcceptance()
    fresh.learn([1], margin=SURE_MARGIN + 1.0)
    assert sure_after == fresh.estimate(3).alpha  # and not here


def test_auto_copies_a_short_match_after_a_sure_token_only() -> None:
    policy = AutoPolicy()
    policy.costs.seed(Q4_0_COSTS)
    lookup = PromptLookupDrafter()
    choices = {}
    for margin in (SURE_MARGIN + 2.0, SURE_MARGIN - 2.0):
        lookup.observe(Outcome([1, 2, 3], NO_DRAFT, 0, margin))
        choices[margin >= SURE_MARGIN] = policy.choose([lookup.offer_match(8, 2)]).mode
    assert choices == {True: "lookup", False: "plain"}


def test_the_decoder_tells_drafters_the_margin_of_the_last_token(
    decoder: SpeculativeDecoder,
) -> None:
    lookup = decoder.drafters["lookup"]
    heard: list[float | None] = []
    observe = lookup.observe

    def listen(outcome: Outcome) -> None:
        heard.append(outcome.margin)
        observe(outcome)

    lookup.observe = listen  # type: ignore[method-assign]
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    done = run(decoder, prompt, mode="lookup", k=4, max_tokens=24)
    last_margins = [r.events[-1].margin for r in done.rounds if r.events]
    assert len(last_margins) >= 3
    assert heard[: len(last_margins)] == last_margins
