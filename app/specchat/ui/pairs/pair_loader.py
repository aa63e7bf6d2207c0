"""Loading a target/draft pair through the worker: which load is current, what is in use."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.ui.pairs.pair_memory import RememberedPair, fallback_for, remember_good
from specchat.workers.generation import (
    Failure,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
)
from specchat.workers.generation_service import GenerationService

log = logging.getLogger(__name__)


def describe_pair(loaded: Loaded) -> str:
    """The loaded models, their backends and the measured plain rate, one line each."""
    info = loaded.info
    lines = [
        f"Target: {info.target.description} · {info.target.backend}"
        + (
            f" ({info.target.gpu_layers}/{info.target.n_layers} layers on GPU)"
            if info.target.gpu_layers
            else ""
        )
    ]
    if info.draft is not None:
        lines.append(f"Draft: {info.draft.description} · {info.draft.backend}")
    if info.head_labels:
        lines.append(f"Drafts with: {', '.join(info.head_labels)}")
    if info.draft is None and not info.head_labels:
        lines.append("No draft model: prompt lookup only")
    if info.template_note:
        # A guessed template can make answers run on or garble: say so where the pair is named.
        lines.append(("⚠ " if info.template_guessed else "") + info.template_note)
    if loaded.baseline is not None:
        lines.append(f"Plain: {loaded.baseline.tokens_per_s:.1f} tok/s (measured)")
    return "\n".join(lines)


def _sentence(text: str) -> str:
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def pair_text(loaded: Loaded | None) -> tuple[str, str]:
    """The panel's title and detail lines for the pair in use (or none)."""
    return (loaded.label, describe_pair(loaded)) if loaded else ("No model loaded", "")


def catalog_pair(pair_id: str) -> dict[str, Any]:
    """What to load for a catalog pair; the worker finds its files, off the UI thread."""
    label = pair_id
    try:
        from specchat.models.catalog import get_pair

        label = get_pair(pair_id).name
    except Exception:  # a broken catalog is reported by the worker's load
        log.debug("catalog lookup failed", exc_info=True)
    return {"pair_id": pair_id, "label": label}


def local_pair(target: Path, draft: Path | None, *, label: str = "") -> dict[str, Any]:
    """What to load for a pair of files on disk."""
    return {"target": target, "draft": draft, "label": label or target.stem}


class PairLoader(QObject):
    """Sends load requests to the worker and passes on only the current load's news.

    Holds no widgets: the window shows what the signals carry. A pair is remembered (as the
    one to load at start, and as a fallback) only once it has loaded: a broken choice never
    comes back at the next start. When a load fails the pair in use before stays in use; when
    nothing is in use, the latest pair that loaded before is loaded instead.

    Attributes:
        service: the generation worker and its thread.
        settings: where the chosen pair is remembered.
        loaded: the pair in use, or None (none yet, or another one is loading).
        last_request: the latest request, repeated by reload().

    Signals:
        started(LoadRequest): a load was sent to the worker.
        progress(LoadProgressUpdate): the current load progressed.
        finished(Loaded): the current load finished; the pair is in use.
        failed(Failure): the current load failed or was cancelled.
    """

    started = Signal(LoadRequest)
    progress = Signal(LoadProgressUpdate)
    finished = Signal(Loaded)
    failed = Signal(Failure)

    def __init__(
        self, *, service: GenerationService, settings: Settings, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.service = service
        self.settings = settings
        self.loaded: Loaded | None = None
        self.last_request: LoadRequest | None = None
        self._load_id: int | None = None
        #: The pair in use when the current load began: still in use if the load fails.
        self._previous: Loaded | None = None
        self._what: dict[str, Any] = {}
        self._gpu: dict[str, int] = {}
        self._fallback = False
        service.load_progress.connect(self._on_load_progress)
        service.loaded.connect(self._on_loaded)
        service.failed.connect(self._on_failed)

    @property
    def loading(self) -> bool:
        """Whether a load is under way."""
        return self._load_id is not None

    def from_settings(self) -> dict[str, Any]:
        """What the settings name (the catalog's default on a first start)."""
        s = self.settings
        pair_id = s.get(cfg.PAIR_ID)
        if pair_id == "custom" and s.get(cfg.CUSTOM_TARGET):
            draft = s.get(cfg.CUSTOM_DRAFT)
            return local_pair(
                Path(s.get(cfg.CUSTOM_TARGET)), Path(draft) if draft else None, label="Local pair"
            )
        return catalog_pair(pair_id)

    def choose(self, choice: object) -> dict[str, Any] | None:
        """What to load for the picker's choice, a catalog pair (its id) or local files (with
        target/draft); None when the choice names nothing. Remembered once it has loaded."""
        if isinstance(choice, str):
            return catalog_pair(choice)
        target = getattr(choice, "target", None)
        if target is None:
            return None
        draft = getattr(choice, "draft", None)
        return local_pair(
            Path(target),
            Path(draft) if draft else None,
            label=str(getattr(choice, "name", "") or "Local pair"),
        )

    def reload(self) -> dict[str, Any]:
        """What to load again: the last request, or what the settings name."""
        last = self.last_request
        if last is None:
            return self.from_settings()
        return {
            "target": last.target,
            "draft": last.draft,
            "pair_id": last.pair_id,
            "label": last.label,
        }

    def load(self, *, target_gpu_layers: int, draft_gpu_layers: int, **what: Any) -> None:
        """Send a load of `what` (LoadRequest fields) to the worker; it replaces any other."""
        request = LoadRequest(
            self.service.new_id(),
            n_ctx=self.settings.get(cfg.N_CTX),
            kv_cache=self.settings.get(cfg.KV_CACHE),
            target_gpu_layers=target_gpu_layers,
            draft_gpu_layers=draft_gpu_layers,
            calibrate=self.settings.get(cfg.CALIBRATE_PLAIN),
            target_variant=self.settings.get(cfg.TARGET_FILE),
            rpc_servers=self.settings.get(cfg.RPC_SERVERS),
            **what,
        )
        self._load_id = request.load_id
        self.last_request = request
        if self.loaded is not None:
            self._previous = self.loaded
        self.loaded = None
        self._what = dict(what)
        self._gpu = {"target_gpu_layers": target_gpu_layers, "draft_gpu_layers": draft_gpu_layers}
        self.started.emit(request)
        self.service.load(request)

    def cancel(self) -> None:
        """Stop the current load between its steps."""
        self.service.worker.cancel_load()

    @Slot(LoadProgressUpdate)
    def _on_load_progress(self, update: LoadProgressUpdate) -> None:
        if update.load_id == self._load_id:
            self.progress.emit(update)

    @Slot(Loaded)
    def _on_loaded(self, loaded: Loaded) -> None:
        if loaded.load_id != self._load_id:
            return
        self.loaded = loaded
        self._previous = None
        self._load_id = None
        self._fallback = False
        remember_good(self.settings, RememberedPair.from_load(self._what))
        self.finished.emit(loaded)

    @Slot(Failure)
    def _on_failed(self, failure: Failure) -> None:
        # An answer's failure goes to the answer controller.
        if failure.load_id is None or failure.load_id != self._load_id:
            return
        self._load_id = None
        previous, self._previous = self._previous, None
        if failure.kept and previous is not None:
            self.loaded = previous
            if not failure.cancelled:
                failure = replace(
                    failure, message=f"{_sentence(failure.message)} Still using {previous.label}."
                )
            self.failed.emit(failure)
            return
        fallback = None
        if not failure.cancelled and not self._fallback:
            fallback = fallback_for(self.settings, RememberedPair.from_load(self._what))
        if fallback is None:
            self._fallback = False
            self.failed.emit(failure)
            return
        label = fallback.load_fields()["label"]
        self.failed.emit(
            replace(
                failure,
                message=(
                    f"{_sentence(failure.message)} Loading {label}, the last pair that worked, "
                    "instead."
                ),
            )
        )
        self._fallback = True  # one fallback: a failing fallback is reported, not chased
        self.load(**self._gpu, **fallback.load_fields())
