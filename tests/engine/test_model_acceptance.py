"""The draft model's acceptance is learnt from every token written, drafted or not: the
target's margin at each says how often the draft model would have been kept there."""

from __future__ import annotations

import math

import pytest

from specchat.engine.drafting.draft_model.model_acceptance import (
    ConfidenceCalibration,
    MarginCalibration,
    TextAcceptance,
)

SURE, UNSURE = 12.0, 0.0


def test_before_any_draft_a_margin_predicts_agreement_as_the_targets_top_probability() -> None:
    calibration = MarginCalibration()
    assert calibration.agreement(UNSURE) == pytest.approx(0.5)
    assert calibration.agreement(SURE) == pytest.approx(1.0 / (1.0 + math.exp(-8.0)))
    assert calibration.agreement(1.5) < calibration.agreement(2.5) < calibration.agreement(6.0)


def test_a_rejected_draft_is_forgotten_once_the_text_turns_predictable() -> None:
    # One draft refused at an answer's start used to hold the estimate below the bar for
    # the rest of the answer: the draft model was never used again to learn otherwise.
    acceptance = TextAcceptance(0.6, 0.6)
    acceptance.learn([UNSURE], drafted=1, kept=0)
    assert acceptance.alpha < 0.5
    for _ in range(30):  # plain rounds over text the target is sure of
        acceptance.learn([SURE], drafted=0, kept=0)
    assert acceptance.alpha > 0.9
    assert acceptance.continued > 0.9
    for _ in range(30):  # then over text where it hesitates between two tokens
        acceptance.learn([UNSURE], drafted=0, kept=0)
    assert acceptance.alpha == pytest.approx(0.5, abs=0.05)


def test_drafted_positions_calibrate_the_margins_for_this_pair() -> None:
    # A draft model that agrees with the target even where it hesitates: its drafts teach
    # the margin band, and the plain rounds after them are read at the learnt rate.
    acceptance = TextAcceptance(0.6, 0.6)
    for _ in range(20):
        acceptance.learn([UNSURE] * 4, drafted=3, kept=3)
    assert acceptance.calibration[True].agreement(UNSURE) > 0.9
    assert acceptance.calibration[False].agreement(UNSURE) == pytest.approx(0.5)
    for _ in range(30):
        acceptance.learn([UNSURE], drafted=0, kept=0)
    assert acceptance.alpha > 0.9


def test_without_margins_only_the_drafted_positions_teach() -> None:
    acceptance = TextAcceptance(0.6, 0.6)
    before = acceptance.alpha
    acceptance.learn([], drafted=0, kept=0)
    assert acceptance.alpha == before
    for _ in range(20):
        acceptance.learn([], drafted=4, kept=1)  # one kept, then refused: every other token
    assert acceptance.alpha == pytest.approx(0.5, abs=0.05)
    assert acceptance.continued < 0.1


def test_a_drafted_tokens_confidence_is_its_prior_chance_and_rounds_correct_it() -> None:
    calibration = ConfidenceCalibration()
    assert calibration.kept_rate(0.3) == pytest.approx(0.3)
    assert calibration.next_rate(0.995) == pytest.approx(0.995)
    for _ in range(40):  # doubted tokens the target keeps anyway, then a sure one refused
        calibration.learn([0.3, 0.5, 0.995], kept=2)
    assert calibration.kept_rate(0.3) > 0.8
    assert calibration.kept_rate(0.995) < 0.2
    assert calibration.next_rate(0.3) > 0.8
    assert calibration.next_rate(0.5) < 0.2
