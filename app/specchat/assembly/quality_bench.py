"""The quality bench as "Optimise for this CPU" asks for it: an optimised copy measured
against its source and stored beside it, and a stored measurement read back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from specchat.workers.optimise_worker import QualityNotMeasured


class QualityBench:
    """bench/live/quality.py for the optimise worker (its `QualityCheck`); the bench and llama.cpp
    are imported when a measurement is asked for, never when the window opens."""

    def stored(self, path: Path) -> str:
        from specchat.bench.live.quality import QualityReport

        return QualityReport.load(path).summary()

    def measure(
        self,
        source: Path,
        output: Path,
        *,
        requantised: bool,
        progress: Callable[[int, int], None],
        cancel: threading.Event,
    ) -> str:
        from specchat.bench.live.quality import QualityCancelled, measure_quality
        from specchat.engine.llamacpp.model import ModelLoadError
        from specchat.models.optimise import quality_path

        try:
            report = measure_quality(
                source, output, requantised=requantised, progress=progress, cancel=cancel
            )
        except QualityCancelled:
            raise QualityNotMeasured("cancelled", cancelled=True) from None
        except ModelLoadError as error:
            raise QualityNotMeasured(str(error)) from None
        report.save(quality_path(output))
        return report.summary()
