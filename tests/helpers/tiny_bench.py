"""The `specchat bench` command line the end-to-end bench tests share: the tiny pair over
the two prompts, one thread, a small context."""

from __future__ import annotations

from pathlib import Path

from specchat.tinymodels import TinyModels
from tests.helpers.bench_prompts import write_prompts


def tiny_bench_argv(
    tiny_models: TinyModels, tmp_path: Path, *options: str, prompts: Path | None = None
) -> list[str]:
    """`bench` on the tiny target and its close draft over `prompts` (write_prompts' two
    by default), on one thread with a 512-token context, then `options` (last, so a test
    may cut its own from the end)."""
    return [
        "bench",
        "--target",
        str(tiny_models.target),
        "--draft",
        str(tiny_models.draft_close),
        "--prompts",
        str(prompts or write_prompts(tmp_path)),
        "--threads",
        "1",
        "--ctx",
        "512",
        *options,
    ]
