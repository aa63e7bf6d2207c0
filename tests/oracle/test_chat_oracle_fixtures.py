"""The committed chat-oracle fixtures are what llama.cpp's chat code gives today.

tools/record_chat_oracle.py is run into a temporary folder with chat-oracle (built from
the llama.cpp our libllama comes from); every file it writes must equal the committed one,
and no committed one may be left unwritten. A difference means llama.cpp's rendering or
parsing moved (a new llama-cpp-python) or the inputs changed: re-record with
`PYTHONPATH=app python tools/record_chat_oracle.py` and read the diff.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.chat_oracle import FIXTURES, RECORDER
from tests.helpers.llama_oracle import oracle_binary

pytestmark = pytest.mark.package


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*.json"))
        if path.name != "conversations.json"
    }


def test_recorded_fixtures_are_current(tmp_path: Path) -> None:
    binary = oracle_binary("chat-oracle")
    done = subprocess.run(
        [sys.executable, str(RECORDER), "--out", str(tmp_path), "--binary", str(binary)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    fresh, committed = _files(tmp_path), _files(FIXTURES)
    assert sorted(fresh) == sorted(committed)
    changed = [name for name in committed if fresh[name] != committed[name]]
    assert not changed, f"llama.cpp now renders or parses these otherwise: {changed}"
