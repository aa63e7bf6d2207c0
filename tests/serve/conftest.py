"""Servers on the tiny pair shared by the API tests of one module: the tiny models' own
ChatML template (no tools), and Qwen 2.5's (tools)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import running_server


@pytest.fixture(scope="module")
def server(tiny_models: TinyModels) -> Iterator[ApiServer]:
    with running_server(tiny_models.target, tiny_models.draft_close, prefixes=PrefixCache()) as s:
        yield s


@pytest.fixture(scope="module")
def tools_server(tools_target: Path, tiny_models: TinyModels) -> Iterator[ApiServer]:
    with running_server(tools_target, tiny_models.draft_close, prefixes=PrefixCache()) as s:
        yield s
