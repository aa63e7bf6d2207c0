"""A copy broken by a substitution (a rename) learns it and carries it through later occurrences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specchat.engine.drafting import PromptLookupDrafter, SuffixDrafter
from specchat.engine.drafting.base import Answer, Draft, Outcome
from specchat.engine.drafting.copies.substitutions import MAX_NEW, RESYNC, Substitutions
from specchat.engine.drafting.lookup.lookup_drafter import locate
from specchat.engine.drafting.prediction.prediction_drafter import PredictionDrafter
from specchat.engine.types import SamplingParams

OLD = 7  # the name being renamed (one token in the source) ...
NEW = (8, 9)  # ... and what the answer writes instead (two tokens)
#: A source of distinct tokens with the old name at three places, as code quotes a variable.
SOURCE = [*range(100, 115), OLD, *range(115, 135), OLD, *range(135, 150), OLD, *range(150, 170)]
PROMPT = [1, 2, *SOURCE, 3]


def renamed(source: list[int], keep_from: int | None = None) -> list[int]:
    """The source with OLD renamed (kept as it was from occurrence `keep_from` on)."""
    out: list[int] = []
    seen = 0
    for token in source:
        if token == OLD and (keep_from is None or seen < keep_from):
            out.extend(NEW)
        else:
            out.append(token)
        seen += token == OLD
    return out


def occurrences(answer: list[int]) -> list[int]:
    """Where the answer writes the new name."""
    return [i for i in range(len(answer) - 1) if tuple(answer[i : i + 2]) == NEW]


def follow(answer: list[int], upto: int) -> tuple[Substitutions, list[int]]:
    """Substitutions tracked round by round over the first `upto` tokens of `answer`."""
    subs = Substitutions(locate)
    for i in range(upto + 1):
        text = [*PROMPT, *answer[:i]]
        start, extent = locate(text)
        subs.track(text, extent, (start, extent))
    return subs, [*PROMPT, *answer[:upto]]


def test_a_rename_is_learnt_at_its_first_occurrence_and_proposed_at_the_next() -> None:
    answer = renamed(SOURCE)
    second = occurrences(answer)[1]
    subs, text = follow(answer, second)
    assert subs.rules == {(OLD,): NEW}
    carried = subs.copy(text, 6)
    assert carried is not None
    tokens, run = carried
    # The new name where the source has the old one, then the source again.
    assert tokens == tuple(answer[second : second + 6])
    assert tokens[:2] == NEW
    # The copy has run since it rejoined its source after the first rename: long enough to
    # be priced as a copy, not as a fresh two-token match.
    assert run >= 20
    # Plain lookup proposes the old name there: the draft would break.
    assert locate(text)[0] >= 0 and text[locate(text)[0]] == OLD


def test_a_change_made_in_one_place_only_is_dropped() -> None:
    # Renamed at the first occurrence, kept as it was at the second.
    answer = renamed(SOURCE, keep_from=1)
    third = len(answer) - 20
    subs, text = follow(answer, third)
    assert subs.rules == {}
    carried = subs.copy(text, 4)
    assert carried is None or NEW[0] not in carried[0]


def test_new_text_after_a_copy_teaches_nothing() -> None:
    answer = [*SOURCE[:15], *range(500, 500 + MAX_NEW + RESYNC + 5), *SOURCE[15:]]
    subs, _ = follow(answer, len(answer))
    assert subs.rules == {}


def test_a_new_answer_forgets_the_last_ones_renames() -> None:
    answer = renamed(SOURCE)
    subs, _ = follow(answer, 45)
    assert subs.rules
    subs.restart()
    assert subs.rules == {}


def _offers_at(
    drafter: PromptLookupDrafter | SuffixDrafter | PredictionDrafter,
    answer: list[int],
    upto: int,
    *,
    prompt: list[int] = PROMPT,
    prediction: Sequence[int] = (),
) -> tuple[int, ...]:
    """The drafter's proposal at answer position `upto`, having offered at every position."""
    drafter.begin(Answer(prompt=prompt, prediction=prediction))
    for i in range(upto):
        drafter.offer([*prompt, *answer[:i]], 16, None)
        drafter.observe(Outcome([*prompt, *answer[: i + 1]], Draft((), None, 0.0, "plain"), 0))
    context = [*prompt, *answer[:upto]]
    drafter.offer(context, 16, None)
    draft = drafter.propose(context, 16, SamplingParams(), np.random.default_rng(0))
    return tuple(draft.tokens)


def test_both_copying_drafters_carry_the_rename() -> None:
    answer = renamed(SOURCE)
    second = occurrences(answer)[1]
    for drafter in (PromptLookupDrafter(), SuffixDrafter()):
        proposal = _offers_at(drafter, answer, second)
        assert proposal[:8] == tuple(answer[second : second + 8]), drafter.name


def test_the_prediction_drafter_carries_a_rename_made_in_its_prediction() -> None:
    # The source is the request's prediction, not the prompt: the prompt never quotes it.
    drafter = PredictionDrafter()
    answer = renamed(SOURCE)
    second = occurrences(answer)[1]
    proposal = _offers_at(drafter, answer, second, prompt=[1, 2, 3], prediction=SOURCE)
    assert proposal[:8] == tuple(answer[second : second + 8])
    assert drafter.substitutions.rules == {(OLD,): NEW}
    # And on to the third occurrence, past the second's new name.
    third = occurrences(answer)[2]
    proposal = _offers_at(drafter, answer, third, prompt=[1, 2, 3], prediction=SOURCE)
    assert proposal[:8] == tuple(answer[third : third + 8])


def test_a_carried_copy_stops_at_the_end_of_its_document() -> None:
    drafter = PredictionDrafter()
    answer = renamed(SOURCE)
    proposal = _offers_at(drafter, answer, len(answer) - 3, prompt=[1, 2, 3], prediction=SOURCE)
    assert proposal == tuple(answer[-3:])
