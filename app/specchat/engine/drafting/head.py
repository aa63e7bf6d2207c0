"""The drafter of every head that reads the target's hidden state: an MTP head, a Gemma 4
assistant, an EAGLE-3 or DFlash draft. Each lives in a package of its own (mtp/, eagle3/,
dflash/) with its llama.cpp driver (over engine/llamacpp/hidden_state_head.py); this module
is what they share, and how a draft file beside the target is loaded for the drafter that
drafts with it (`head_architectures`, `load_head`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specchat.engine.costs.priors import HEAD_PRIOR, HURDLE, MAX_K, UNMEASURED_HEAD_SHARE
from specchat.engine.costs.table import CostTable
from specchat.engine.drafting.base import (
    Acceptance,
    Draft,
    Drafter,
    Head,
    LoadedPair,
    Offer,
    Outcome,
    expected_tokens,
    through_end,
)
from specchat.engine.drafting.registry import drafter_classes
from specchat.engine.types import SamplingParams

if TYPE_CHECKING:
    from specchat.engine.llamacpp.hidden_state_head import HiddenStateHead
    from specchat.engine.llamacpp.load import ProgressCallback
    from specchat.engine.llamacpp.model import LlamaModel


class HeadDrafter(Drafter):
    """Drafts with a head that reads the target's hidden state (see mtp/mtp_driver.py).

    Its drafts are its head's argmax, also when sampling (a deterministic proposal: the
    verifier's one-hot rejection sampling keeps the target's law). It times itself per
    drafted token; feeding the head the target's rows happens inside the target's passes,
    whose measured costs include it.

    A subclass says where its head comes from: a draft file of its `architecture` loaded
    beside the target (`load_beside`, found again in the pair by the head's `serves`), or
    one it makes itself (`own_head`), and which file's weights it runs (`weights_file`,
    what its stored cost table is keyed by); `create` is the same for every head.

    Attributes:
        head: the head it drafts with.
        driver: its head where that is a llama.cpp driver of its own (None: a head given
            made, a replay's record): its `n_max` bounds a round's draft (a DFlash block's
            masks).
        min_confidence: stop a draft at a token the head gives less than this probability
            (after the first); 0, llama.cpp's default, never stops.
        table: its cost table (one size: a drafted token): the machine's stored one where
            the pair's costs hold it (measured between answers, engine/costs/profiling.py).
    """

    #: Where its kept tokens came from, for people: the tooltip's "drafted from …", the
    #: kept-drafts line, the API's `specchat` object.
    origin: str = ""
    #: The architecture (general.architecture) of the draft file it drafts with, loaded
    #: beside the target (LoadedPair.head); "" for a head it makes itself.
    architecture: str = ""

    def __init__(
        self,
        head: Head,
        *,
        min_confidence: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
        driver: HiddenStateHead | None = None,
    ) -> None:
        super().__init__()
        self.head = head
        self.driver = driver
        self.min_confidence = min_confidence
        self._clock = clock
        self._acceptance = Acceptance.prior(*HEAD_PRIOR)
        self.table = CostTable(sizes=(1,))

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        given = pair.heads.get(cls.name)
        own = cls.own_head(pair) if given is None else None
        head: Head | None = given if given is not None else own
        if head is None:
            return None
        drafter = cls(head, clock=pair.clock, driver=own)
        drafter._ends_answer = pair.ends_answer
        if pair.costs is not None and cls.name in pair.costs.heads:
            # The stored table the background measurement fills is the one it prices with.
            drafter.table = pair.costs.heads[cls.name]
        return drafter

    @classmethod
    def load_beside(
        cls,
        path: Path,
        target: LlamaModel,
        *,
        n_gpu_layers: int = 0,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> HiddenStateHead:
        """The draft file at `path` (of its `architecture`) loaded beside `target`, serving
        this drafter."""
        raise NotImplementedError(f"the {cls.name} drafter loads no draft file")

    @classmethod
    def own_head(cls, pair: LoadedPair) -> HiddenStateHead | None:
        """The head `pair` offers this drafter, made now (None: it offers none); by
        default the draft file loaded beside the target, where it serves this drafter."""
        head = pair.head
        if not cls.architecture or head is None or head.serves != cls.name:
            return None
        return head

    @classmethod
    def weights_file(cls, pair: LoadedPair) -> Path | None:
        """The file whose weights its head runs, where `pair` offers one (None: it offers
        none), without making the head: the costs are loaded before the drafters are built."""
        head = cls.own_head(pair) if cls.architecture else None
        return None if head is None else head.path

    @property
    def k_limit(self) -> int:
        """The most tokens its head drafts in one round."""
        n_max = None if self.driver is None else self.driver.n_max
        return MAX_K if n_max is None else n_max

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        k_max = min(MAX_K, k_cap, self.k_limit)
        if k_max <= 0 or not self.head.ready:
            return None
        alpha, continued = self._acceptance.alpha, self._acceptance.continued
        token_ms = self.table.cost_ms(1)
        if token_ms is None:
            token_ms = prices[1] / UNMEASURED_HEAD_SHARE if prices is not None else 0.0
        return Offer(
            source=self.name,
            k_max=k_max,
            curve=[expected_tokens(alpha, k, continued) for k in range(k_max + 1)],
            token_ms=token_ms,
            hurdle=HURDLE,
            probed=True,
            detail=f"α ≈ {alpha:.2f}",
        )

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        began = self._clock()
        tokens = self.head.draft(context[-1], k, min_confidence=self.min_confidence)
        ms = (self._clock() - began) * 1000.0
        return Draft(through_end(tokens, self._ends_answer), None, ms, self.name, self.origin)

    def observe(self, outcome: Outcome) -> None:
        super().observe(outcome)
        drafted = len(outcome.draft.tokens)
        if outcome.draft.source == self.name and drafted:
            self.table.observe(1, outcome.draft.ms / drafted)


def head_drafters() -> tuple[type[HeadDrafter], ...]:
    """Every registered drafter that drafts with a head over the target's hidden state."""
    return tuple(
        cls
        for cls in drafter_classes()
        if cls.listing.reads_target and issubclass(cls, HeadDrafter)
    )


def head_architectures() -> frozenset[str]:
    """The architectures (general.architecture) of the draft files loaded as heads."""
    return frozenset(cls.architecture for cls in head_drafters() if cls.architecture)


def load_head(
    path: Path,
    architecture: str,
    target: LlamaModel,
    *,
    n_gpu_layers: int = 0,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> HiddenStateHead:
    """The draft file at `path`, of `architecture` (one of head_architectures()), loaded
    beside `target` for the drafter that drafts with it."""
    for cls in head_drafters():
        if cls.architecture == architecture:
            return cls.load_beside(
                path, target, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel
            )
    raise KeyError(architecture)


def head_files(pair: LoadedPair) -> dict[str, Path]:
    """The weights file of every head `pair` offers, by the drafter that drafts with it:
    what each head's stored cost table is keyed by."""
    files: dict[str, Path] = {}
    for cls in head_drafters():
        path = cls.weights_file(pair)
        if path is not None:
            files[cls.name] = path
    return files
