"""Reading typed values out of a parsed catalog, with errors that name the file's line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class CatalogError(ValueError):
    """A catalog that cannot be used; the message names the file, line and key."""


# --- locating a key in the raw text -----------------------------------------------------

_PAIR_HEADER = re.compile(r"^\s*\[\[\s*pair\s*\]\]")
_SUB_HEADER = re.compile(r"^\s*\[\s*pair\.([\w.]+)\s*\]")
_OTHER_HEADER = re.compile(r"^\s*\[")
_KEY = re.compile(r"^\s*([\w-]+|\"[^\"]*\")\s*=")


def find_line(text: str, pair_index: int | None, section: tuple[str, ...], key: str | None) -> int:
    """1-based line of `key` in pair number `pair_index` (None: top level), table `section`.

    tomllib reports no positions for values it parsed fine, so the line is found by
    walking the raw text the same way TOML nests tables; falls back to the table header.
    """
    current_pair = -1
    current_section: tuple[str, ...] | None = () if pair_index is None else None
    header_line = 1
    pair_line = 1
    for number, line in enumerate(text.splitlines(), start=1):
        if _PAIR_HEADER.match(line):
            current_pair += 1
            current_section = () if current_pair == pair_index else None
            if current_pair == pair_index:
                pair_line = header_line = number
            continue
        sub = _SUB_HEADER.match(line)
        if sub:
            inside = current_pair == pair_index and pair_index is not None
            current_section = tuple(sub.group(1).split(".")) if inside else None
            if inside and current_section == section:
                header_line = number
            continue
        if _OTHER_HEADER.match(line):
            current_section = None
            continue
        if current_section is None:
            continue
        found = _KEY.match(line)
        if not found:
            continue
        name = found.group(1).strip('"')
        if key is not None and current_section == section and name == key:
            return number
        # An inline table (`target = { ... }`) holds the section on one line.
        if section and current_section == section[:-1] and name == section[-1]:
            return number
    return header_line if section or key is None else pair_line


class Checker:
    """Reads typed values out of parsed TOML, raising CatalogError that names the line."""

    def __init__(self, text: str, source: Path) -> None:
        self.text = text
        self.source = source

    def fail(
        self,
        message: str,
        *,
        pair: int | None,
        section: tuple[str, ...] = (),
        key: str | None = None,
    ) -> CatalogError:
        line = find_line(self.text, pair, section, key)
        return CatalogError(f"{self.source.name} line {line}: {message}")

    def table(
        self, parent: Mapping[str, Any], key: str, *, pair: int, section: tuple[str, ...]
    ) -> Mapping[str, Any] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(f"'{key}' must be a table", pair=pair, section=section, key=key)
        return value

    def get(
        self,
        table: Mapping[str, Any],
        key: str,
        kind: type | tuple[type, ...],
        *,
        pair: int,
        section: tuple[str, ...],
        label: str,
        required: bool = True,
        default: Any = None,
    ) -> Any:
        if key not in table:
            if required:
                raise self.fail(f"{label}: missing '{key}'", pair=pair, section=section)
            return default
        value = table[key]
        # bool is an int in Python; a size of `true` is a mistake, not 1.
        wrong_bool = isinstance(value, bool) and kind is int
        if wrong_bool or not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.fail(
                f"{label}: '{key}' must be {names}, not {type(value).__name__}",
                pair=pair,
                section=section,
                key=key,
            )
        return value

    def no_unknown(
        self,
        table: Mapping[str, Any],
        allowed: set[str],
        *,
        pair: int | None,
        section: tuple[str, ...],
        label: str,
    ) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(
                    f"{label}: unknown key '{key}' (expected one of {', '.join(sorted(allowed))})",
                    pair=pair,
                    section=section,
                    key=key,
                )
