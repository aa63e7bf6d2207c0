"""A two-prompt bench file (one copy-heavy code edit, one chat) for `specchat bench` runs."""

from __future__ import annotations

import json
from pathlib import Path


def write_prompts(tmp_path: Path) -> Path:
    """Write the two prompts as `prompts.jsonl` in `tmp_path` and return its path."""
    path = tmp_path / "prompts.jsonl"
    lines = [
        {"id": "edit", "user": "one two one two one two", "category": "code-editing"},
        {"id": "chat", "user": "hello", "category": "creative"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path
