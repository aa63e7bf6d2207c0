"""No file in app/ is longer than the limit: long files get split into modules with one job,
never packed."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.imports import source_files

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
#: The longest a file in app/ may be.
MAX_LINES = 600


def test_no_file_in_app_is_longer_than_the_limit() -> None:
    lengths = {
        path.relative_to(APP.parent): path.read_bytes().count(b"\n") for path in source_files(APP)
    }
    assert len(lengths) > 50  # the walk found the code
    too_long = {str(path): n for path, n in sorted(lengths.items()) if n > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines (split them): {too_long}"


def test_no_formatter_escapes() -> None:
    # A line count met by hand-packed lines the formatter is told to leave alone is not met:
    # the file still holds too much, only denser.
    escapes = re.compile(r"#\s*fmt:\s*(skip|off)\b")
    found = []
    for folder in ("app", "tests", "tools"):
        for path in source_files(ROOT / folder):
            if path.suffix != ".py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if escapes.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}")
    assert not found, "formatter escapes (format the lines, split the file): " + ", ".join(found)
