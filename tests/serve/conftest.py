"""A server on the tiny pair shared by the API tests of one module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import running_server


@pytest.fixture(scope="module")
def server(tiny_models: TinyModels) -> Iterator[ApiServer]:
    with running_server(tiny_models.target, tiny_models.draft_close, prefixes=PrefixCache()) as s:
        yield s
