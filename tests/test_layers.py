"""Layer rules: ui/ never imports llama_cpp or huggingface_hub; engine/ and models/ never Qt."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import specchat
from tests.helpers.imports import import_graph

PACKAGE = Path(specchat.__file__).parent


def _modules(folder: str) -> list[str]:
    """Every module under `folder`, its sub-packages' included."""
    names = []
    for path in (PACKAGE / folder).rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(("specchat", *parts)))
    return sorted(names)


#: engine/'s rooms, each allowed to import only the rooms before it (and engine/types.py,
#: engine/sampling.py). The modules at engine/'s top level compose them and may import any.
ENGINE_ROOMS = ("templates", "llamacpp", "costs", "suffix", "drafting", "decoding")
ENGINE_SHARED = ("specchat.engine.types", "specchat.engine.sampling")


def _imported_after(modules: list[str]) -> set[str]:
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_ui_never_imports_llama_cpp_or_huggingface_hub() -> None:
    loaded = _imported_after(_modules("ui"))
    assert "PySide6.QtWidgets" in loaded  # the probe did import the widgets
    assert not {m for m in loaded if m.split(".")[0] in ("llama_cpp", "huggingface_hub")}


def test_ui_sources_do_not_name_them_either() -> None:
    for path in (PACKAGE / "ui").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                assert root not in ("llama_cpp", "huggingface_hub"), f"{path.name}: {name}"
                assert not name.startswith("specchat.engine.llamacpp.model"), f"{path.name}: {name}"


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_engine_rooms_import_only_the_rooms_below_them() -> None:
    graph = import_graph(PACKAGE)
    for index, room in enumerate(ENGINE_ROOMS):
        allowed = (*(f"specchat.engine.{r}" for r in ENGINE_ROOMS[: index + 1]), *ENGINE_SHARED)
        for module in (m for m in graph if _within(m, (f"specchat.engine.{room}",))):
            for name in graph[module]:
                if name.startswith("specchat.engine") and name != "specchat.engine":
                    assert _within(name, allowed), f"{module} imports {name}"


def test_engine_top_level_is_small() -> None:
    top = [p for p in (PACKAGE / "engine").glob("*.py") if p.stem != "__init__"]
    assert len(top) <= 15, sorted(p.name for p in top)


def test_models_never_import_the_engine() -> None:
    graph = import_graph(PACKAGE)
    for module in (m for m in graph if _within(m, ("specchat.models",))):
        engine = {name for name in graph[module] if name.startswith("specchat.engine")}
        assert not engine, f"{module} imports {sorted(engine)}"


def test_engine_and_models_never_import_qt() -> None:
    loaded = _imported_after(_modules("engine") + _modules("models") + ["specchat.store"])
    assert "llama_cpp" in loaded  # the probe did import the engine
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}


def test_serve_never_imports_qt() -> None:
    """The HTTP API runs without the window: `specchat serve` on a machine with no display."""
    loaded = _imported_after([*_modules("serve"), "specchat.commands.serve"])
    assert "uvicorn" in loaded and "starlette" in loaded  # the probe did import the server
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}


def test_the_engine_host_never_imports_qt() -> None:
    """The one engine host serves `specchat serve` too: its Qt adapter lives in workers/."""
    loaded = _imported_after(_modules("host"))
    assert "specchat.host.runner" in loaded  # the probe did import the host's jobs
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}
