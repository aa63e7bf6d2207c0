"""No file in app/ is longer than the limit: long files get split into modules with one job."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import source_files

APP = Path(__file__).resolve().parents[1] / "app"
#: The longest a file in app/ may be.
MAX_LINES = 600


def test_no_file_in_app_is_longer_than_the_limit() -> None:
    lengths = {
        path.relative_to(APP.parent): path.read_bytes().count(b"\n") for path in source_files(APP)
    }
    assert len(lengths) > 50  # the walk found the code
    too_long = {str(path): n for path, n in sorted(lengths.items()) if n > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines (split them): {too_long}"
