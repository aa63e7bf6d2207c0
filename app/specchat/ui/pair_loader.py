"""Loading a target/draft pair through the worker: which load is current, what is in use."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.workers.generation import (
    Failure,
    GenerationService,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
)

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
    else:
        lines.append("No draft model: prompt lookup only")
    if info.template_note:
        # A guessed template can make answers run on or garble: say so where the pair is named.
        lines.append(("⚠ " if info.template_guessed else "") + info.template_note)
    if loaded.baseline is not None:
        lines.append(f"Plain: {loaded.baseline.tokens_per_s:.1f} tok/s (measured)")
    return "\n".join(lines)


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

    Holds no widgets: the window shows what the signals carry.

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
        """Remember the picker's choice, a catalog pair (its id) or local files (with
        target/draft); returns what to load, None when the choice names nothing."""
        if isinstance(choice, str):
            self.settings.set(cfg.PAIR_ID, choice)
            return catalog_pair(choice)
        target = getattr(choice, "target", None)
        if target is None:
            return None
        draft = getattr(choice, "draft", None)
        self.settings.set(cfg.PAIR_ID, "custom")
        self.settings.set(cfg.CUSTOM_TARGET, str(target))
        self.settings.set(cfg.CUSTOM_DRAFT, str(draft) if draft else "")
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
        return {"target": last.target, "draft": last.draft, "pair_id": last.pair_id,
                "label": last.label}  # fmt: skip

    def load(self, *, target_gpu_layers: int, draft_gpu_layers: int, **what: Any) -> None:
        """Send a load of `what` (LoadRequest fields) to the worker; it replaces any other."""
        request = LoadRequest(
            self.service.new_id(),
            n_ctx=self.settings.get(cfg.N_CTX),
            target_gpu_layers=target_gpu_layers,
            draft_gpu_layers=draft_gpu_layers,
            calibrate=self.settings.get(cfg.CALIBRATE_PLAIN),
            target_variant=self.settings.get(cfg.TARGET_FILE),
            **what,
        )
        self._load_id = request.load_id
        self.last_request = request
        self.loaded = None
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
        self._load_id = None
        self.finished.emit(loaded)

    @Slot(Failure)
    def _on_failed(self, failure: Failure) -> None:
        # An answer's failure goes to the answer controller.
        if failure.load_id is None or failure.load_id != self._load_id:
            return
        self._load_id = None
        self.failed.emit(failure)
