"""A short soak: memory stays flat while the engine generates continuously."""

from __future__ import annotations

import pytest

from specchat.engine.session import ChatEngine
from specchat.soak import soak
from specchat.tinymodels import TinyModels


@pytest.mark.slow
def test_memory_is_flat_after_warmup(tiny_models: TinyModels) -> None:
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=1024)
    try:
        report = soak(engine, seconds=20, max_tokens=48)
    finally:
        engine.close()
    assert report.samples[-1].answers >= 20
    assert report.growth < 0.05, f"RSS grew {report.growth:.1%} after warm-up"
