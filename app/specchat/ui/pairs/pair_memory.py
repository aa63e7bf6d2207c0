"""Which pairs the settings remember: every local pair added, and the pairs that loaded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat import settings as cfg
from specchat.settings import Settings

#: How many pairs that loaded are kept as fallbacks.
GOOD_KEPT = 8


@dataclass(frozen=True)
class RememberedPair:
    """A pair the settings name: a catalog id, or local files.

    Attributes:
        pair_id: the catalog id ("" for local files).
        target: the local target GGUF, or None for a catalog pair.
        draft: the local draft GGUF, or None.
        label: what the window calls it.
    """

    pair_id: str = ""
    target: Path | None = None
    draft: Path | None = None
    label: str = ""

    @classmethod
    def from_load(cls, what: dict[str, Any]) -> RememberedPair:
        """From LoadRequest fields (pair_id, or target/draft, and label)."""
        target, draft = what.get("target"), what.get("draft")
        return cls(
            pair_id="" if target is not None else str(what.get("pair_id") or ""),
            target=Path(target) if target is not None else None,
            draft=Path(draft) if draft is not None else None,
            label=str(what.get("label") or ""),
        )

    @classmethod
    def from_json(cls, raw: object) -> RememberedPair | None:
        if not isinstance(raw, dict):
            return None
        target, draft = raw.get("target"), raw.get("draft")
        pair = cls(
            pair_id=str(raw.get("pair_id") or ""),
            target=Path(target) if isinstance(target, str) and target else None,
            draft=Path(draft) if isinstance(draft, str) and draft else None,
            label=str(raw.get("label") or ""),
        )
        return pair if pair.pair_id or pair.target is not None else None

    def to_json(self) -> dict[str, str]:
        return {
            "pair_id": self.pair_id,
            "target": str(self.target) if self.target else "",
            "draft": str(self.draft) if self.draft else "",
            "label": self.label,
        }

    def load_fields(self) -> dict[str, Any]:
        """LoadRequest fields that load this pair again."""
        if self.target is not None:
            return {"target": self.target, "draft": self.draft, "label": self.label or "Local pair"}
        return {"pair_id": self.pair_id, "label": self.label or self.pair_id}

    def same_as(self, other: RememberedPair) -> bool:
        return (self.pair_id, self.target, self.draft) == (other.pair_id, other.target, other.draft)

    def files_present(self) -> bool:
        """Local files still on disk (a catalog pair is checked by its load)."""
        if self.target is None:
            return True
        return self.target.is_file() and (self.draft is None or self.draft.is_file())


def _read(settings: Settings, setting: cfg.Setting[list[Any]]) -> list[RememberedPair]:
    pairs = [RememberedPair.from_json(raw) for raw in settings.get(setting)]
    return [pair for pair in pairs if pair is not None]


def custom_pairs(settings: Settings) -> list[RememberedPair]:
    """Every local pair the user added, oldest first (the single pair of older settings too)."""
    pairs = _read(settings, cfg.CUSTOM_PAIRS)
    legacy = settings.get(cfg.CUSTOM_TARGET)
    if legacy:
        draft = settings.get(cfg.CUSTOM_DRAFT)
        old = RememberedPair(target=Path(legacy), draft=Path(draft) if draft else None)
        if not any(old.same_as(pair) for pair in pairs):
            pairs.insert(0, old)
    return pairs


def remember_custom(settings: Settings, pair: RememberedPair) -> None:
    """Add a local pair to the remembered ones (once)."""
    if pair.target is None:
        return
    pairs = [p for p in _read(settings, cfg.CUSTOM_PAIRS) if not p.same_as(pair)]
    pairs.append(pair)
    settings.set(cfg.CUSTOM_PAIRS, [p.to_json() for p in pairs])


def good_pairs(settings: Settings) -> list[RememberedPair]:
    """Pairs that loaded, latest first."""
    return _read(settings, cfg.GOOD_PAIRS)


def remember_good(settings: Settings, pair: RememberedPair) -> None:
    """`pair` loaded: it becomes the pair used at start, and the first fallback."""
    if pair.target is not None:
        settings.set(cfg.PAIR_ID, "custom")
        settings.set(cfg.CUSTOM_TARGET, str(pair.target))
        settings.set(cfg.CUSTOM_DRAFT, str(pair.draft) if pair.draft else "")
        remember_custom(settings, pair)
    else:
        settings.set(cfg.PAIR_ID, pair.pair_id)
    pairs = [p for p in good_pairs(settings) if not p.same_as(pair)]
    settings.set(cfg.GOOD_PAIRS, [p.to_json() for p in [pair, *pairs][:GOOD_KEPT]])


def fallback_for(settings: Settings, failed: RememberedPair) -> RememberedPair | None:
    """The latest pair that loaded before, other than `failed`, whose files are still there."""
    for pair in good_pairs(settings):
        if not pair.same_as(failed) and pair.files_present():
            return pair
    return None
