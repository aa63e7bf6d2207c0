"""Engine fixtures: tiny models loaded once per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinymodels import TinyModels


@pytest.fixture(scope="module")
def tiny_target(tiny_models: TinyModels) -> Iterator[LlamaModel]:
    model = LlamaModel(tiny_models.target, n_ctx=1024)
    yield model
    model.close()


@pytest.fixture(scope="module")
def tiny_draft(tiny_models: TinyModels) -> Iterator[LlamaModel]:
    model = LlamaModel(tiny_models.draft_close, n_ctx=1024)
    yield model
    model.close()


@pytest.fixture
def decoder(tiny_target: LlamaModel, tiny_draft: LlamaModel) -> SpeculativeDecoder:
    """A fresh decoder (fresh auto policy) over the module's tiny target and close draft."""
    tiny_target.reset()
    tiny_draft.reset()
    return SpeculativeDecoder(LoadedPair.of(tiny_target, tiny_draft))
