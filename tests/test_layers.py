"""Layer rules: ui/ never imports llama_cpp or huggingface_hub; engine/ and models/ never Qt."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import specchat

PACKAGE = Path(specchat.__file__).parent


def _modules(folder: str) -> list[str]:
    return sorted(
        f"specchat.{folder}.{p.stem}" if p.stem != "__init__" else f"specchat.{folder}"
        for p in (PACKAGE / folder).glob("*.py")
    )


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
                assert not name.startswith("specchat.engine.llama"), f"{path.name}: {name}"


def test_engine_and_models_never_import_qt() -> None:
    loaded = _imported_after(_modules("engine") + _modules("models") + ["specchat.store"])
    assert "llama_cpp" in loaded  # the probe did import the engine
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}


def test_serve_never_imports_qt() -> None:
    """The HTTP API runs without the window: `specchat serve` on a machine with no display."""
    loaded = _imported_after([*_modules("serve"), "specchat.commands.serve"])
    assert "uvicorn" in loaded and "starlette" in loaded  # the probe did import the server
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}
