"""Layer rules: ui/ never imports llama_cpp or huggingface_hub; engine/ and models/ never Qt;
host/ never imports serve/, which only its starters import."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import specchat
from tests.helpers.imports import import_graph, imported_names

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
    for path in (PACKAGE / "ui").rglob("*.py"):
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


#: ui/'s rooms, each allowed to import only the rooms before it (and ui/palette.py, which
#: every room paints with): the window composes the rest.
UI_ROOMS = ("transcript", "panels", "pairs", "chat", "window")


def test_ui_rooms_import_only_the_rooms_below_them() -> None:
    graph = import_graph(PACKAGE)
    rooms = {p.name for p in (PACKAGE / "ui").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(UI_ROOMS)  # a new room takes its place in the order
    for index, room in enumerate(UI_ROOMS):
        allowed = (*(f"specchat.ui.{r}" for r in UI_ROOMS[: index + 1]), "specchat.ui.palette")
        for module in (m for m in graph if _within(m, (f"specchat.ui.{room}",))):
            for name in graph[module]:
                if name.startswith("specchat.ui") and name != "specchat.ui":
                    assert _within(name, allowed), f"{module} imports {name}"


def test_ui_top_level_holds_only_the_palette() -> None:
    top = sorted(p.name for p in (PACKAGE / "ui").glob("*.py"))
    assert top == ["__init__.py", "palette.py"]


#: bench/'s rooms, each allowed to import only the rooms before it (and bench/prompts.py,
#: the prompt sets every room reads): the timed runs and the traces they record, the replay
#: that reads those traces, the bench through the API, the agent bench over it, the peers
#: (llama-server and llama-cpp-python on the same prompts), the report.
BENCH_ROOMS = ("live", "hindsight", "api", "agent", "peers", "reports")


def test_bench_rooms_import_only_the_rooms_below_them() -> None:
    graph = import_graph(PACKAGE)
    rooms = {p.name for p in (PACKAGE / "bench").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(BENCH_ROOMS)  # a new room takes its place in the order
    for index, room in enumerate(BENCH_ROOMS):
        allowed = (
            *(f"specchat.bench.{r}" for r in BENCH_ROOMS[: index + 1]),
            "specchat.bench.prompts",
        )
        for module in (m for m in graph if _within(m, (f"specchat.bench.{room}",))):
            for name in graph[module]:
                if name.startswith("specchat.bench") and name != "specchat.bench":
                    assert _within(name, allowed), f"{module} imports {name}"


def test_bench_top_level_holds_only_the_prompts() -> None:
    top = sorted(p.name for p in (PACKAGE / "bench").glob("*.py"))
    assert top == ["__init__.py", "prompts.py"]


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
    assert "specchat.host.job_runner" in loaded  # the probe did import the host's jobs
    assert not {m for m in loaded if m.split(".")[0] in ("PySide6", "shiboken6")}


#: What may start the API outside serve/ (`specchat serve`, the window's "Serve API"
#: switch, the bench's runs through the API), and all they may take from it to start it.
SERVE_STARTERS = (
    "commands.serve",
    "assembly.api_service",
    "bench.agent.agent_bench",
    "bench.api.via_api",
    "bench.api.follow_up",
)
SERVE_STARTING = {
    "serve.server": {"ApiServer"},
    "serve.guard": {"ServeOptions", "check_options"},
    "serve.app": {"ServedModel", "served_model"},
}


def _serve_imports(package_dir: Path) -> list[str]:
    """Every import of the package's serve/ that breaks the rules: one from host/, or one
    from outside serve/ other than a starter taking what starts the server."""
    top = package_dir.name
    serve, host = f"{top}.serve", f"{top}.host"
    starters = {f"{top}.{name}" for name in SERVE_STARTERS}
    starting = {f"{top}.{name}": names for name, names in SERVE_STARTING.items()}
    broken = []
    for module, rows in imported_names(package_dir).items():
        if _within(module, (serve,)):
            continue
        for base, names in rows:
            # `from specchat import serve` names the package through its parent.
            targets = [base, *(f"{base}.{name}" for name in names)]
            hit = next((t for t in targets if _within(t, (serve,))), None)
            if hit is None:
                continue
            allowed = starting.get(base)
            if _within(module, (host,)) or module not in starters:
                broken.append(f"{module} imports {hit}")
            elif allowed is None or not names or not set(names) <= allowed:
                broken.append(f"{module} takes {sorted(names)} from {base}")
    return broken


def test_host_never_imports_serve_and_only_starters_do() -> None:
    """`serve` depends on `host` in one direction only; outside serve/ only what starts the
    server imports it, and only the server and its options."""
    graph = import_graph(PACKAGE)
    assert any(_within(n, ("specchat.host",)) for n in graph["specchat.serve.app"])
    assert not _serve_imports(PACKAGE)


def test_the_serve_rule_sees_every_import(tmp_path: Path) -> None:
    """The rule catches an import from host/ inside a function or under TYPE_CHECKING, a
    starter taking more than the server, and anyone else importing serve/."""
    files = {
        "pkg/__init__.py": "",
        "pkg/serve/__init__.py": "",
        "pkg/serve/server.py": "from pkg.host import runner\nApiServer = 1\n",
        "pkg/serve/guard.py": "ServeOptions = 1\n",
        "pkg/serve/shaping.py": "evaluated = 1\n",
        "pkg/host/__init__.py": "",
        "pkg/host/runner.py": "def run():\n    from pkg.serve import shaping\n",
        "pkg/host/jobs.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ..serve.guard import ServeOptions\n",
        "pkg/commands/__init__.py": "",
        "pkg/commands/serve.py": "from pkg.serve.server import ApiServer\n"
        "from pkg.serve.guard import ServeOptions\n",
        "pkg/bench/__init__.py": "",
        "pkg/bench/api/__init__.py": "",
        "pkg/bench/api/via_api.py": "from pkg.serve.shaping import evaluated\n",
        "pkg/ui/__init__.py": "",
        "pkg/ui/window.py": "from pkg import serve\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    assert sorted(_serve_imports(tmp_path / "pkg")) == [
        "pkg.bench.api.via_api takes ['evaluated'] from pkg.serve.shaping",
        "pkg.host.jobs imports pkg.serve.guard",
        "pkg.host.runner imports pkg.serve",
        "pkg.ui.window imports pkg.serve",
    ]
