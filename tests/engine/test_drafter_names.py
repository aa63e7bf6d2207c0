"""The round loop, the engine, the policy and the bench's replay never name a drafter: each is
found through the registry, so a new drafter is one module and its registration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specchat.engine.drafting.registry import drafter_classes

APP = Path(__file__).resolve().parents[2] / "app" / "specchat"
GENERIC = (
    "engine/decoding/decoder.py",
    "engine/session.py",
    "engine/decoding/schedule.py",
    "bench/hindsight/replay.py",
)


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
    text = (APP / file).read_text(encoding="utf-8")
    classes = drafter_classes()
    assert len(classes) >= 4  # lookup, suffix, draft model, chain
    for cls in classes:
        for pattern in _patterns(cls):
            assert not re.search(pattern, text), (file, pattern)


def test_the_replay_names_no_drafter_at_all() -> None:
    """Not even in passing: the replay runs whatever the registry holds."""
    text = (APP / "bench" / "hindsight" / "replay.py").read_text(encoding="utf-8")
    for cls in drafter_classes():
        assert not re.search(rf"[\"']{re.escape(cls.name)}[\"']", text), cls.name
        assert cls.__name__ not in text, cls.__name__
    assert "MIN_CONFIDENCE" not in text and "drafting.model" not in text
