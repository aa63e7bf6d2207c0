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
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from specchat.engine.costs.machine import estimate_catchup_ms
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

#: The driver a subclass's draft file loads as (HiddenStateHead where it loads none).
HeadT = TypeVar("HeadT", bound="HiddenStateHead")


class HeadDrafter(Drafter, Generic[HeadT]):
    """Drafts with a head that reads the target's hidden state (see mtp/mtp_driver.py).

    Its drafts are its head's argmax, also when sampling (a deterministic proposal: the
    verifier's one-hot rejection sampling keeps the target's law). It times itself per
    drafted token. The head keeps the target's rows of the passes it did not draft for and
    is fed them in one batch before it drafts (its catch-up, priced in its offer as the
    draft model's is, and timed apart), so a head left unused costs nothing per round.

    A subclass says where its head comes from: a draft file of its `architecture` loaded
    beside the target as its driver (`load_beside`, the same for every draft file: the
    subclass names the driver, `head_class`, and any file it refuses, `check_file`; found
    again in the pair by the head's `serves`), or one it makes itself (`own_head`), and
    which file's weights it runs (`weights_file`, what its stored cost table is keyed by);
    `create` is the same for every head.

    Attributes:
        head: the head it drafts with.
        driver: its head where that is a llama.cpp driver of its own (None: a head given
            made, a replay's record): its `n_max` bounds a round's draft (a DFlash block's
            masks).
        min_confidence: stop a draft at a token the head gives less than this probability
            (after the first); 0, llama.cpp's default, never stops.
        table: its cost table (one size: a drafted token): the machine's stored one where
            the pair's costs hold it (measured between answers, engine/costs/profiling.py).
        catchup_token_ms: smoothed milliseconds per position of its catch-up (None before
            one was timed).
    """

    #: Weight of a new catch-up timing in `catchup_token_ms`.
    smoothing = 0.3

    #: Where its kept tokens came from, for people: the tooltip's "drafted from …", the
    #: kept-drafts line, the API's `specchat` object.
    origin: str = ""
    #: The architecture (general.architecture) of the draft file it drafts with, loaded
    #: beside the target (LoadedPair.head); "" for a head it makes itself.
    architecture: str = ""
    #: What a head loaded from its draft file is called, before the file's name.
    file_label: str = ""

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
        self.catchup_token_ms: float | None = None
        self._catchup_ms = 0.0  # the last proposal's catch-up, apart from its drafted tokens

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
    ) -> HeadT:
        """The draft file at `path` (of its `architecture`) loaded beside `target`, serving
        this drafter (a draft file has no context of its own without the target's: llama.cpp
        refuses one)."""
        from specchat.engine.llamacpp.load import load_weights

        if not cls.architecture:
            raise NotImplementedError(f"the {cls.name} drafter loads no draft file")
        cls.check_file(path)
        weights = load_weights(path, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel)
        name = f"{cls.file_label} {path.name}"
        return cls.head_class()(target, weights, name=name, path=path, serves=cls.name)

    @classmethod
    def head_class(cls) -> type[HeadT]:
        """The llama.cpp driver its draft file is loaded as (imported only then: a driver
        binds llama.cpp)."""
        raise NotImplementedError(f"the {cls.name} drafter loads no draft file")

    @classmethod
    def check_file(cls, path: Path) -> None:
        """Raise ModelLoadError where the draft file at `path` is one it cannot run, before
        its weights are loaded (by default every file of its architecture runs)."""

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
        plain_ms = None if prices is None else prices[1]
        token_ms, probe_token_ms = self.table.drafted_token_ms(plain_ms, UNMEASURED_HEAD_SHARE)
        lag = 0 if self.driver is None else self.driver.lag
        return Offer(
            source=self.name,
            k_max=k_max,
            curve=[expected_tokens(alpha, k, continued) for k in range(k_max + 1)],
            token_ms=token_ms,
            probe_token_ms=probe_token_ms,
            extra_ms=estimate_catchup_ms(lag, self.catchup_token_ms, self.table),
            hurdle=HURDLE,
            probed=True,
            detail=f"α ≈ {alpha:.2f}",
        )

    def ready(self, prompt: Sequence[int]) -> None:
        """Feed the head what it kept of the prompt now (where the answer will likely draft
        with it)."""
        if self.driver is not None and self.head.ready:
            self._catch_up()

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        catchup_ms = self._catch_up() if self.driver is not None and self.head.ready else 0.0
        self._catchup_ms = catchup_ms
        began = self._clock()
        tokens = self.head.draft(context[-1], k, min_confidence=self.min_confidence)
        ms = (self._clock() - began) * 1000.0
        return Draft(
            through_end(tokens, self._ends_answer), None, ms + catchup_ms, self.name, self.origin
        )

    def _catch_up(self) -> float:
        """Feed the head what it kept; its time (ms), learnt per position where it was more
        than a round's."""
        assert self.driver is not None
        began = self._clock()
        fed = self.driver.catch_up()
        ms = (self._clock() - began) * 1000.0
        if fed > 2:
            new = ms / fed
            old = self.catchup_token_ms
            self.catchup_token_ms = new if old is None else old + self.smoothing * (new - old)
        return ms

    def observe(self, outcome: Outcome) -> None:
        super().observe(outcome)
        drafted = len(outcome.draft.tokens)
        if outcome.draft.source == self.name and drafted:
            # Its catch-up is timed apart (catchup_token_ms): a drafted token's time is the rest.
            self.table.observe(1, max(0.0, outcome.draft.ms - self._catchup_ms) / drafted)


def head_drafters() -> tuple[type[HeadDrafter[Any]], ...]:
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
            head: HiddenStateHead = cls.load_beside(
                path, target, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel
            )
            return head
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
