"""The round loop, the engine and the policy never name a drafter: each is found through the
registry, so a new drafter is one module and its registration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specchat.engine.drafting.registry import drafter_classes

ENGINE = Path(__file__).resolve().parents[2] / "app" / "specchat" / "engine"
GENERIC = ("decoder.py", "session.py", "schedule.py")


def _patterns(cls: type) -> list[str]:
    """What would name the drafter in code: its class, its module, its mode name looked up
    or compared ("draft" alone is also the draft model's loading stage)."""
    module = cls.__module__.rsplit(".", 1)[-1]
    quoted = f"[\"']{re.escape(cls.name)}[\"']"
    return [
        re.escape(cls.__name__),
        re.escape(f"drafting.{module}"),
        rf"(get\(|\[|==\s*|!=\s*|in\s*\(?){quoted}",
    ]


@pytest.mark.parametrize("file", GENERIC)
def test_no_drafter_is_named_in_the_generic_modules(file: str) -> None:
    text = (ENGINE / file).read_text(encoding="utf-8")
    classes = drafter_classes()
    assert len(classes) >= 4  # lookup, suffix, draft model, chain
    for cls in classes:
        for pattern in _patterns(cls):
            assert not re.search(pattern, text), (file, pattern)
