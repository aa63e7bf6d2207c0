"""With costs pinned, `auto` makes the recorded choice in every round of the shipped prompts."""

from __future__ import annotations

import json
from pathlib import Path

from specchat.tinymodels import TinyModels
from tests.helpers.policy_choices import TABLES, record_all

FIXTURE = Path(__file__).parent / "data" / "pinned_policy_choices.json"


def test_auto_makes_the_recorded_choices(tiny_models: TinyModels) -> None:
    # Re-record with tools/record_policy_choices.py only when the policy is meant to change.
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert set(expected) == {t.name for t in TABLES}
    got = record_all(tiny_models.target, tiny_models.draft_close)
    for table, prompts in expected.items():
        for prompt_id, choices in prompts.items():
            assert got[table][prompt_id] == choices, (table, prompt_id)
    assert got == expected
