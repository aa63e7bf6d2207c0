"""OptimiseWorker: a pair's target files, and "Optimise for this CPU" (Q4_0 copy) on a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal, Slot

from specchat.models.transfer import DownloadProgress, FreeSpace
from specchat.workers.lifecycle import WorkerLifecycle


class QualityNotMeasured(Exception):
    """The quality measurement did not happen; the message says why.

    Attributes:
        cancelled: the user cancelled it.
    """

    def __init__(self, reason: str, *, cancelled: bool = False) -> None:
        super().__init__(reason)
        self.cancelled = cancelled


class QualityCheck(Protocol):
    """The quality bench as the worker needs it (assembled in assembly/quality_bench.py)."""

    def stored(self, path: Path) -> str:
        """The summary of the measurement stored at `path` (OSError, ValueError, KeyError
        or TypeError when it cannot be read)."""

    def measure(
        self,
        source: Path,
        output: Path,
        *,
        requantised: bool,
        progress: Callable[[int, int], None],
        cancel: threading.Event,
    ) -> str:
        """Measure `output` against `source` and store it beside `output`; its summary.
        Raises QualityNotMeasured."""


@dataclass(frozen=True)
class TargetOption:
    """One target file a pair can run.

    Attributes:
        variant: "target" (as shipped), "cpu" (the catalog's CPU format) or "optimised".
        filename: its file name.
        quantisation: its format.
        reason: why it exists ("" for the shipped file).
        path: where it is on disk, or None.
    """

    variant: str
    filename: str
    quantisation: str
    reason: str
    path: Path | None


@dataclass(frozen=True)
class TargetChoices:
    """What the picker shows about a pair's target files.

    Attributes:
        pair_id: the pair.
        options: its target files, shipped first.
        quality: the stored quality measurement of the optimised copy (a summary), if any.
    """

    pair_id: str
    options: tuple[TargetOption, ...]
    quality: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptimiseProgress:
    """Progress of "Optimise for this CPU".

    Attributes:
        pair_id: the pair.
        stage: "convert", "check" or "quality".
        fraction: 0..1, or None when unknown.
        text: one line for the progress bar.
    """

    pair_id: str
    stage: str
    fraction: float | None
    text: str


@dataclass(frozen=True)
class OptimiseEnded:
    """How "Optimise for this CPU" ended.

    Attributes:
        pair_id: the pair.
        ok: the copy was made (and measured).
        cancelled: the user cancelled (no partial file was kept).
        message: what to tell the user.
        path: the copy, when made.
        quality: the quality measurement (a summary).
    """

    pair_id: str
    ok: bool
    cancelled: bool
    message: str
    path: Path | None = None
    quality: tuple[str, ...] = ()


def target_choices(
    pair_id: str,
    *,
    quality: QualityCheck,
    cache_dir: Path | None = None,
    models_dir: Path | None = None,
) -> TargetChoices:
    """A pair's target files and the optimised copy's stored quality (worker thread only)."""
    from specchat.models.catalog import load_catalog
    from specchat.models.optimise import quality_path
    from specchat.models.target_files import TargetVariant, target_files

    pair = load_catalog().get(pair_id)
    files = target_files(pair, cache_dir=cache_dir, models_dir=models_dir)
    options = tuple(
        TargetOption(f.variant.value, f.filename, f.quantisation, f.reason, f.path) for f in files
    )
    summary: tuple[str, ...] = ()
    for f in files:
        if f.variant is TargetVariant.OPTIMISED and f.path is not None:
            stored = quality_path(f.path)
            if stored.is_file():
                try:
                    summary = (quality.stored(stored),)
                except (OSError, ValueError, KeyError, TypeError):
                    summary = ("The stored quality measurement cannot be read.",)
    return TargetChoices(pair_id, options, summary)


class OptimiseWorker(QObject):
    """Surveys target files and converts a pair's target into Q4_0, then measures it (with
    the quality bench it is given).

    Signals:
        surveyed(TargetChoices): a pair's target files.
        progress(OptimiseProgress): conversion, check and quality progress.
        ended(OptimiseEnded): a conversion finished, failed or was cancelled.
        closed(): the worker is done; its thread may quit.
    """

    surveyed = Signal(TargetChoices)
    progress = Signal(OptimiseProgress)
    ended = Signal(OptimiseEnded)
    closed = Signal()

    def __init__(
        self,
        *,
        quality: QualityCheck,
        cache_dir: Path | None = None,
        models_dir: Path | None = None,
        free_space: FreeSpace | None = None,
    ) -> None:
        super().__init__()
        self._quality = quality
        self._cache_dir = cache_dir
        self._models_dir = models_dir
        self._free_space = free_space
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Thread-safe: stop the conversion (its child is killed, nothing is kept)."""
        self._cancel.set()

    def rearm(self) -> None:
        self._cancel.clear()

    @Slot(str)
    def _on_survey_requested(self, pair_id: str) -> None:
        try:
            choices = self._choices(pair_id)
        except Exception as error:  # a broken catalog must not kill the thread
            choices = TargetChoices(pair_id, (), (f"Cannot list the target files: {error}",))
        self.surveyed.emit(choices)

    @Slot(str)
    def _on_optimise_requested(self, pair_id: str) -> None:
        self.ended.emit(self._optimise(pair_id))
        self._on_survey_requested(pair_id)

    def _choices(self, pair_id: str) -> TargetChoices:
        return target_choices(
            pair_id, quality=self._quality, cache_dir=self._cache_dir, models_dir=self._models_dir
        )

    def _optimise(self, pair_id: str) -> OptimiseEnded:
        from specchat.models.optimise import (
            FULL_WEIGHT_FTYPES,
            OptimiseCancelled,
            OptimiseError,
            derived_path,
            optimise,
            quality_path,
        )
        from specchat.models.target_files import TargetVariant

        choices = self._choices(pair_id)
        source = next(
            (o.path for o in choices.options if o.variant == TargetVariant.SHIPPED.value), None
        )
        if source is None:
            return OptimiseEnded(pair_id, False, False, "Download the pair first.")

        def report(event: DownloadProgress) -> None:
            verb = {"convert": "converting to Q4_0", "check": "checking the copy loads"}
            line = f"{verb.get(event.stage, event.stage)}"
            if event.fraction is not None:
                line += f" · {event.fraction * 100:.0f} %"
            self.progress.emit(OptimiseProgress(pair_id, event.stage, event.fraction, line))

        output = derived_path(source, models_dir=self._models_dir)
        try:
            done = optimise(
                source,
                output=output,
                progress=report,
                cancel=self._cancel,
                free_space=self._free_space,
            )
        except OptimiseCancelled:
            return OptimiseEnded(pair_id, False, True, "Cancelled; no partial file was kept.")
        except OptimiseError as error:
            return OptimiseEnded(pair_id, False, False, str(error))
        quality_path(output).unlink(missing_ok=True)
        message = f"Made {output.name} in {done.seconds:.0f} s."

        def scored(step: int, total: int) -> None:
            self.progress.emit(
                OptimiseProgress(
                    pair_id, "quality", step / total, f"measuring quality · {step}/{total}"
                )
            )

        from specchat.models.gguf_reader import read_metadata

        ftype = read_metadata(source, keys=("general.file_type",)).get("general.file_type")
        try:
            summary = self._quality.measure(
                source,
                output,
                requantised=ftype not in FULL_WEIGHT_FTYPES,
                progress=scored,
                cancel=self._cancel,
            )
        except QualityNotMeasured as error:
            why = " (cancelled)." if error.cancelled else f": {error}"
            said = f"{message} Quality not measured{why}"
            return OptimiseEnded(pair_id, True, False, said, output)
        return OptimiseEnded(pair_id, True, False, message, output, (summary,))

    @Slot()
    def _on_shutdown_requested(self) -> None:
        self.closed.emit()


class OptimiseService(QObject):
    """An OptimiseWorker on its own QThread, driven through queued signals.

    Attributes:
        worker: the worker (lives on `worker_thread`).
        worker_thread: its thread.
        busy: a conversion is under way.

    Signals:
        survey_requested(str), optimise_requested(str), shutdown_requested(): to the worker.
        surveyed, progress, ended: the worker's signals, re-emitted on the UI thread.
    """

    survey_requested = Signal(str)
    optimise_requested = Signal(str)
    shutdown_requested = Signal()
    surveyed = Signal(TargetChoices)
    progress = Signal(OptimiseProgress)
    ended = Signal(OptimiseEnded)

    def __init__(
        self,
        *,
        quality: QualityCheck,
        cache_dir: Path | None = None,
        models_dir: Path | None = None,
        free_space: FreeSpace | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.worker = OptimiseWorker(
            quality=quality, cache_dir=cache_dir, models_dir=models_dir, free_space=free_space
        )
        self._lifecycle = WorkerLifecycle("specchat-optimise")
        self.worker_thread = self._lifecycle.thread
        self.busy = False

    def start(self) -> None:
        worker = self.worker
        self._lifecycle.start(
            self,
            worker,
            requests=[
                (self.survey_requested, worker._on_survey_requested),
                (self.optimise_requested, worker._on_optimise_requested),
                (self.shutdown_requested, worker._on_shutdown_requested),
            ],
            relayed=("surveyed", "progress", "ended"),
        )
        self.ended.connect(self._on_ended)

    def survey(self, pair_id: str) -> None:
        self.survey_requested.emit(pair_id)

    def optimise(self, pair_id: str) -> None:
        self.busy = True
        self.worker.rearm()
        self.optimise_requested.emit(pair_id)

    def cancel(self) -> None:
        self.worker.cancel()

    def shutdown(self, *, timeout_s: float = 3.0) -> bool:
        """Cancel a conversion (nothing is kept), stop the thread, wait at most `timeout_s`."""
        return self._lifecycle.stop(
            cancel=self.worker.cancel,
            request_shutdown=self.shutdown_requested.emit,
            timeout_s=timeout_s,
        )

    @Slot(OptimiseEnded)
    def _on_ended(self, _ended: OptimiseEnded) -> None:
        self.busy = False
