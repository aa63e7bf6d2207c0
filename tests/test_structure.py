"""No import cycles between SpecChat's modules.

The import walk reads the sources (AST), resolving absolute `specchat.*` and relative
imports. It counts imports inside functions: a deferred import still makes the two
modules depend on each other, only later. It counts imports under `if TYPE_CHECKING:` too:
they never run, but a module that needs another's types to be read is no more separable
from it than one that calls it, and such imports are how a cycle hides from the run-time
walk. See tests/helpers/imports.py for what it does not see.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.helpers.imports import find_cycles, import_graph, module_names

PACKAGE = Path(__file__).resolve().parents[1] / "app" / "specchat"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "pkg"


def test_the_package_has_no_import_cycles() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and graph["specchat.ui.window.main_window"]  # the walk found the code
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def test_cycles_are_found_through_relative_and_deferred_imports(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import thing\n",
            "pkg/b.py": "def thing():\n    from . import c\n",
            "pkg/c.py": "from .sub import d\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/d.py": "from ..a import x\n",
            "pkg/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.f\n",
            "pkg/f.py": "import pkg.e\n",
        },
    )
    graph = import_graph(package)
    assert graph["pkg.b"] == {"pkg.c"} and graph["pkg.sub.d"] == {"pkg.a"}
    assert graph["pkg.e"] == {"pkg.f"}  # a type-checking import counts
    assert find_cycles(graph) == [
        ["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d", "pkg.a"],
        ["pkg.e", "pkg.f", "pkg.e"],
    ]


def test_no_two_modules_share_a_file_name() -> None:
    """A module's file name says what it holds, once: `runner.py` in two rooms makes every
    mention ask which. Packages' `__init__.py` are not modules of their own."""
    by_name: dict[str, set[str]] = {}
    for path in module_names(PACKAGE).values():
        if path.name != "__init__.py":
            by_name.setdefault(path.name, set()).add(path.relative_to(PACKAGE).as_posix())
    repeats = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not repeats, "\n".join(
        f"{name}: {sorted(paths)}" for name, paths in sorted(repeats.items())
    )
