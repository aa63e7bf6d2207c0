"""The `specchat bench` command line the end-to-end bench tests share: the tiny pair over
the two prompts, one thread, a small context."""

from __future__ import annotations

from pathlib import Path

from specchat.tinymodels import TinyModels
from tests.helpers.bench_prompts import write_prompts


def tiny_bench_argv(tiny_models: TinyModels, tmp_path: Path, *options: str) -> list[str]:
    """`bench` on the tiny target and its close draft over write_prompts' two prompts, on
    one thread with a 512-token context, then `options` (last, so a test may cut its own
    from the end)."""
    return [
        "bench",
        "--target",
        str(tiny_models.target),
        "--draft",
        str(tiny_models.draft_close),
        "--prompts",
        str(write_prompts(tmp_path)),
        "--threads",
        "1",
        "--ctx",
        "512",
        *options,
    ]
