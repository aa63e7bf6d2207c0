"""The drafter registry: every drafter class by name, and the set a loaded pair offers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from specchat.engine.drafting.base import Drafter, Head, Listing, LoadedPair
from specchat.engine.drafting.head_protocol import DraftsWithHead

#: The modes that are not drafters: the policy chooses per round, or no drafting at all.
AUTO = "auto"
PLAIN = "plain"
#: What a fixed mode whose drafter the pair cannot serve falls back to (it needs no model).
FALLBACK = "lookup"

_classes: dict[str, type[Drafter]] = {}

D = TypeVar("D", bound=type[Drafter])


def register(cls: D) -> D:
    """Class decorator: make a drafter a mode everywhere (engine, window, CLI, bench)."""
    name = getattr(cls, "name", "")
    if not name or not name.isidentifier() or name != name.lower():
        raise ValueError(f"a drafter's name must be a lower-case identifier, not {name!r}")
    if not isinstance(getattr(cls, "listing", None), Listing):
        raise ValueError(f"the drafter {name!r} has no `listing`")
    if name in (AUTO, PLAIN) or (name in _classes and _classes[name] is not cls):
        raise ValueError(f"a mode named {name!r} exists already")
    _classes[name] = cls
    return cls


def unregister(name: str) -> None:
    """Forget a drafter (tests register toy drafters and remove them again)."""
    _classes.pop(name, None)


def drafter_classes() -> tuple[type[Drafter], ...]:
    """Every registered drafter by priority (auto's order of preference on ties)."""
    return tuple(sorted(_classes.values(), key=lambda c: c.listing.priority))


@dataclass(frozen=True)
class ModeInfo:
    """One entry of the mode list.

    Attributes:
        name: the mode's name ("auto", "plain" or a drafter's name).
        label: what people see.
        needs_model: whether it needs the pair's draft model.
    """

    name: str
    label: str
    needs_model: bool


def modes() -> tuple[ModeInfo, ...]:
    """Auto, every registered drafter, then plain: the window's list, the CLI's choices."""
    return (
        ModeInfo(AUTO, "Auto", False),
        *(ModeInfo(c.name, c.listing.label, c.listing.needs_model) for c in drafter_classes()),
        ModeInfo(PLAIN, "Off (plain decoding)", False),
    )


def mode_names() -> tuple[str, ...]:
    return tuple(m.name for m in modes())


def mode_info(name: str) -> ModeInfo:
    for info in modes():
        if info.name == name:
            return info
    raise KeyError(name)


def needs_model(mode: str) -> bool:
    """Whether `mode` needs a draft model (unknown names: no)."""
    cls = _classes.get(mode)
    return bool(cls and cls.listing.needs_model)


def reads_target(mode: str) -> bool:
    """Whether `mode` drafts with a head over the target's hidden state (unknown names: no)."""
    cls = _classes.get(mode)
    return bool(cls and cls.listing.reads_target)


def parse_mode(text: str) -> str:
    """A mode name from user input, or ValueError naming the choices."""
    name = str(getattr(text, "value", text)).strip().lower()
    if name not in mode_names():
        raise ValueError(f"unknown drafting mode {text!r}; choose one of {', '.join(mode_names())}")
    return name


def auto_drafters(drafters: Iterable[Drafter]) -> tuple[Drafter, ...]:
    """The drafters `auto` asks each round: those it may choose, less any that another one
    present subsumes (asking both would pay a second search and a second curve every round
    for offers the subsuming one makes too; measured in docs/costs.md, "What choosing
    costs")."""
    drafters = tuple(d for d in drafters if d.listing.in_auto)
    covered = {name for drafter in drafters for name in drafter.listing.subsumes}
    return tuple(d for d in drafters if d.name not in covered)


def mode_name(mode: object) -> str:
    """The name of a mode given as a name or as a legacy enum member."""
    return str(getattr(mode, "value", mode))


def build(pair: LoadedPair) -> dict[str, Drafter]:
    """Every registered drafter `pair` can serve, by name, in the registry's order, its
    estimates started where the pair's `estimates` say."""
    # A draft model whose cache cannot be rolled back at all would re-read the whole context
    # after every proposal: the drafters that need it are not built.
    model = pair.draft is not None and pair.draft.can_rollback
    built: dict[str, Drafter] = {}
    for cls in drafter_classes():
        if cls.listing.needs_model and not model:
            continue
        drafter = cls.create(pair, dict(built))
        if drafter is not None:
            pair.estimates.start(drafter)
            built[cls.name] = drafter
    return built


class Drafters:
    """The drafters a loaded pair offers, built from the registry in its order.

    Attributes:
        pair: what they were built on: the models, their costs, and the suffix index they
            copy from (the session's, or the pair's own).
        for_auto: the ones `auto` asks each round (see auto_drafters).
    """

    def __init__(self, pair: LoadedPair) -> None:
        self.pair = pair
        self._built = build(pair)
        self.for_auto = auto_drafters(self._built.values())

    def __iter__(self) -> Iterator[Drafter]:
        return iter(tuple(self._built.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._built

    def __getitem__(self, name: str) -> Drafter:
        return self._built[name]

    def get(self, name: str) -> Drafter | None:
        return self._built.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._built)

    def heads(self) -> dict[str, Head]:
        """The heads over the target's hidden state its drafters draft with, by drafter."""
        heads: dict[str, Head] = {}
        for drafter in self._built.values():
            if drafter.listing.reads_target and isinstance(drafter, DraftsWithHead):
                heads[drafter.name] = drafter.head
        return heads

    def resolve(self, mode: object) -> str:
        """The mode that will run: auto, plain or an available drafter (else the fallback)."""
        name = mode_name(mode)
        if name in (AUTO, PLAIN) or name in self._built:
            return name
        return FALLBACK if FALLBACK in self._built else PLAIN
