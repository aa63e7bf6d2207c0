"""Random multi-bit flips of the tiny model through SpecChat's own load path (validate, load,
template, generate): every file is refused with a typed error or loads and runs; none kills the
process.

SPECCHAT_GGUF_FLIPS sets how many files (docs/reliability.md quotes a run of 1,500).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from specchat.models.gguf_reader import validate
from specchat.tinymodels import TinyModels

SEED = 20_250_606
DEFAULT_FILES = 500

#: Loads each file named on stdin as the app does (ChatEngine.load validates first), renders
#: a chat and generates a few tokens; prints a line before and after each file so the parent
#: can tell which one killed the process, if one does.
_RUNNER = textwrap.dedent(
    """
    import json, sys
    from specchat.engine.templates.chat_template import ChatMessage
    from specchat.engine.session import ChatEngine
    from specchat.engine.types import Controls, GenerationRequest

    for index, path in enumerate(json.loads(sys.stdin.read())):
        print("START", index, flush=True)
        try:
            engine = ChatEngine.load(path, n_ctx=128, target_gpu_layers=0, n_threads=1)
            try:
                prompt = engine.prepare([ChatMessage("user", "hi")], max_tokens=8).tokens
                rounds = list(engine.generate(GenerationRequest(prompt, 8, Controls("lookup"))))
            finally:
                engine.close()
            print("RAN", index, rounds[-1].stop.name, flush=True)
        except Exception as error:
            print("REFUSED", index, type(error).__name__, flush=True)
    """
)

#: What the app turns into a specific message (workers/generation.py describe_error); anything
#: else would reach the user as "Unexpected error".
EXPECTED_ERRORS = {
    "ModelLoadError",
    "ChatTemplateError",
    "ContextOverflowError",
    "ContextFullError",
    "DecodeError",
}


#: Share of all files that must pass validation and run in llama.cpp: a validator that
#: refused everything would pass the crash check, so the fuzz must reach llama.cpp.
MIN_RAN_SHARE = 0.15


def _flipped(original: bytes, data_offset: int, rng: np.random.Generator) -> tuple[bytes, bool]:
    """A copy with random bit flips, and whether every flip fell in the tensor data."""
    buf = bytearray(original)
    data_only = True
    # Mostly in the header and metadata, where parsing can go wrong; some anywhere.
    # One flip half the time, two a quarter, … up to 16: few enough that many files still
    # pass validation and reach llama.cpp.
    for _ in range(min(16, int(rng.geometric(0.5)))):
        end = data_offset if rng.random() < 0.8 else len(buf)
        pos = int(rng.integers(0, end))
        buf[pos] ^= 1 << int(rng.integers(0, 8))
        data_only = data_only and pos >= data_offset
    return bytes(buf), data_only


def _run_all(paths: list[Path]) -> dict[int, str]:
    """Outcome per index: 'RAN <stop>', 'REFUSED <error type>' or 'CRASH ...'.

    A process that handled every file but then exits badly (an abort in a destructor, at
    interpreter exit) marks its last file 'CRASH' too.
    """
    outcome: dict[int, str] = {}
    start = 0
    while start < len(paths):
        result = subprocess.run(
            [sys.executable, "-c", _RUNNER],
            input=json.dumps([str(p) for p in paths[start:]]),
            capture_output=True,
            text=True,
            timeout=900,
        )
        current = None
        for line in result.stdout.splitlines():
            word, _, rest = line.partition(" ")
            if word not in ("START", "RAN", "REFUSED") or not rest:
                continue
            index, _, detail = rest.partition(" ")
            if word == "START":
                current = int(index) + start
            else:
                outcome[int(index) + start] = f"{word} {detail}".strip()
                current = None
        if current is None:
            if result.returncode != 0:
                outcome[len(paths) - 1] = (
                    f"CRASH at exit (exit {result.returncode}): {result.stderr[-300:]}"
                )
            break
        outcome[current] = f"CRASH (exit {result.returncode}): {result.stderr[-300:]}"
        start = current + 1
    return outcome


def test_random_multi_bit_flips_never_kill_the_process(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    count = int(os.environ.get("SPECCHAT_GGUF_FLIPS", DEFAULT_FILES))
    original = tiny_models.target.read_bytes()
    data_offset = validate(tiny_models.target).data_offset
    rng = np.random.default_rng(SEED)
    paths = []
    data_only: list[int] = []
    for number in range(count):
        path = tmp_path / f"f{number:05d}.gguf"
        data, in_data = _flipped(original, data_offset, rng)
        path.write_bytes(data)
        paths.append(path)
        if in_data:
            data_only.append(number)
    outcome = _run_all(paths)
    assert len(outcome) == count
    crashes = {paths[i].name: r for i, r in outcome.items() if r.startswith("CRASH")}
    assert crashes == {}
    kinds = Counter(r for r in outcome.values())
    errors = {r.split()[1] for r in outcome.values() if r.startswith("REFUSED")}
    assert errors <= EXPECTED_ERRORS, f"untyped failures: {errors - EXPECTED_ERRORS}"
    # Flips in tensor data change weights, never the structure: each such file must pass
    # validation and generate in llama.cpp.
    assert data_only, "no file had its flips in tensor data only"
    not_run = {paths[i].name: outcome[i] for i in data_only if not outcome[i].startswith("RAN")}
    assert not_run == {}
    ran = sum(r.startswith("RAN") for r in outcome.values())
    assert ran >= MIN_RAN_SHARE * count, f"only {ran} of {count} files reached llama.cpp and ran"
    print(
        f"\n{count} files with 1-16 random bit flips (seed {SEED}): {dict(sorted(kinds.items()))}"
        f"; {ran} ran in llama.cpp, {len(data_only)} of them flipped in tensor data only"
    )


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        # The two llama.cpp aborts the 10,000-file run found (GGML_ASSERT in llama-model.cpp
        # and in ggml_reshape): a high bit flipped in block_count, and in head_count_kv.
        ("llama.block_count", 2 + (1 << 17), "block_count is 131074"),
        ("llama.attention.head_count_kv", 4 + (1 << 29), "does not divide head_count"),
        ("llama.attention.head_count_kv", 0, "does not divide head_count"),
        ("llama.attention.head_count", 4 + (1 << 24), "not a multiple of head_count"),
    ],
)
def test_hyperparameters_that_abort_llama_cpp_are_refused(
    tiny_models: TinyModels, tmp_path: Path, key: str, value: int, reason: str
) -> None:
    from specchat.engine.llamacpp.model import ModelLoadError
    from specchat.engine.session import ChatEngine
    from specchat.models.gguf_reader import GGUFError

    at = validate(tiny_models.target).metadata.offsets[key]
    data = bytearray(tiny_models.target.read_bytes())
    struct.pack_into("<I", data, at, value)
    path = tmp_path / "bad.gguf"
    path.write_bytes(bytes(data))
    with pytest.raises(GGUFError, match=reason):
        validate(path)
    with pytest.raises(ModelLoadError, match=reason):
        ChatEngine.load(path, n_ctx=64, target_gpu_layers=0, n_threads=1)
