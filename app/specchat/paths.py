"""Where SpecChat keeps its files, and where its bundled resources are found."""

from __future__ import annotations

import os
import sys
from importlib import resources as importlib_resources
from pathlib import Path

import platformdirs

APP_NAME = "specchat"

#: Environment variable that relocates every per-user directory (tests, portable use).
HOME_ENV = "SPECCHAT_HOME"


def _base(kind: str) -> Path:
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override) / kind
    getter = {
        "config": platformdirs.user_config_dir,
        "data": platformdirs.user_data_dir,
        "cache": platformdirs.user_cache_dir,
        "log": platformdirs.user_log_dir,
    }[kind]
    return Path(getter(APP_NAME, appauthor=False))


def config_dir() -> Path:
    """Settings and the user's own model catalog."""
    return _base("config")


def data_dir() -> Path:
    """Conversations database and downloaded models."""
    return _base("data")


def cache_dir() -> Path:
    """Re-creatable files of this profile (thumbnails, logs of runs)."""
    return _base("cache")


def log_dir() -> Path:
    return _base("log")


def shared_cache_dir() -> Path:
    """Model cache that survives SPECCHAT_HOME overrides.

    Models are large and re-creatable, so they live in the user cache like the hub's own.
    Tests relocate SPECCHAT_HOME to a temporary directory but must not fetch 1.6 GB every
    run, so this honours only SPECCHAT_MODEL_CACHE.
    """
    override = os.environ.get("SPECCHAT_MODEL_CACHE")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    """Model files assembled from the mirror (hub downloads stay in the hub cache)."""
    return shared_cache_dir() / "models"


def mirror_cache_dir() -> Path:
    """Downloaded mirror chunk packages, kept so an interrupted fetch resumes."""
    return shared_cache_dir() / "mirror"


def resources_dir() -> Path:
    """The bundled resources folder in a source checkout, an installed wheel or a frozen bundle."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "specchat" / "resources"
    source_tree = Path(__file__).resolve().parents[2] / "resources"
    if source_tree.is_dir():
        return source_tree
    # Through the regular package: specchat.resources has no __init__.py, and files() of a
    # namespace package is a MultiplexedPath whose str() is not a path.
    return Path(str(importlib_resources.files("specchat"))) / "resources"


def resource(*parts: str) -> Path:
    path = resources_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"SpecChat resource missing: {'/'.join(parts)} (looked in {path})")
    return path


def catalog_path() -> Path:
    """The shipped models.toml (source tree, wheel or bundle)."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "specchat" / "data" / "models.toml"
    source_tree = Path(__file__).resolve().parents[2] / "models.toml"
    if source_tree.is_file():
        return source_tree
    return Path(str(importlib_resources.files("specchat") / "data" / "models.toml"))


def chat_template_path(name: str) -> Path:
    """A publisher's chat template SpecChat ships (data/chat_templates: source tree, wheel
    or bundle)."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "specchat" / "data" / "chat_templates" / name
    return Path(str(importlib_resources.files("specchat") / "data" / "chat_templates" / name))


def user_catalog_path() -> Path:
    """A user's own models.toml, extending the shipped catalog."""
    return config_dir() / "models.toml"
