"""The import graph of a package, read from its sources (AST), and its cycles."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path


def source_files(root: Path) -> Iterator[Path]:
    """Every file under `root`, not following symbolic links (app/specchat/resources is one)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            yield Path(folder) / name


def module_names(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at `package_dir`."""
    top = package_dir.name
    modules: dict[str, Path] = {}
    for path in source_files(package_dir):
        if path.suffix != ".py":
            continue
        parts = [top, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement: at module level and inside functions, classes, try and if
    blocks, those under `if TYPE_CHECKING:` included (a module that needs another's types
    depends on it as much as one that needs its code)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names, relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports.

    `from a import b` counts as importing module `a.b` when that is a module, else `a`.
    Importing `a.b` also runs package `a`'s __init__, but that implicit edge is not counted:
    a package re-exporting its submodules would otherwise always look like a cycle.
    Imports built at run time (importlib.import_module) are not seen.
    """
    modules = module_names(package_dir)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(name, is_package, node)
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    targets.append(submodule if submodule in modules else base)
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def imported_names(package_dir: Path) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """Module -> each import it makes, anywhere in it (functions and `if TYPE_CHECKING:`
    too): the module named, relative levels resolved, and the names taken from it (none for
    a plain `import`)."""
    found: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for name, path in module_names(package_dir).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        rows = found.setdefault(name, [])
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                rows.extend((alias.name, ()) for alias in node.names)
            else:
                base = _resolve(name, is_package, node)
                rows.append((base, tuple(alias.name for alias in node.names)))
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a → … → a) through each strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; the graph is small
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    members = set(group)
    start = group[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {group}")
