"""Regenerating at temperature 0 repeats the answer: say why, and offer a warmer try."""

from __future__ import annotations

from typing import Any

#: The temperature offered when a greedy answer is regenerated.
WARMER = 0.7


def offer_warmer(window: Any) -> bool:
    """After a regenerate at temperature 0, explain the repeat and offer WARMER; True if shown.

    Greedy decoding always picks the likeliest token, so the same conversation gets the same
    answer: without this note a regenerate looks like it did nothing.
    """
    controls = window.controls
    if controls.state().sampling.temperature > 0:
        return False

    def warmer() -> None:
        controls.temperature_slider.setValue(round(WARMER * 100))
        window.regenerate()

    window.banner.show_message(
        "At temperature 0 the answer is the likeliest text, so a regenerated answer is the same.",
        kind="info",
        palette=window.palette_,
        action=(f"Regenerate with temperature {WARMER}", warmer),
    )
    return True
