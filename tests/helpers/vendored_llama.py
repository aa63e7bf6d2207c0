"""The llama.cpp source tree llama-cpp-python vendors (its chat templates, real vocabularies
and tokenizer cases), fetched once by tools/fetch_llama_source.sh."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FETCH_SCRIPT = REPO / "tools" / "fetch_llama_source.sh"

#: The sdist is about 80 MB from the package index.
FETCH_TIMEOUT_S = 900


@functools.cache
def llama_source() -> Path:
    """The vendored llama.cpp tree; RuntimeError with the script's output when it fails."""
    done = subprocess.run(
        ["bash", str(FETCH_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{FETCH_SCRIPT.name} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def tokenizer_cases(vocab: Path) -> list[tuple[str, list[int]]]:
    """llama.cpp's tokenizer cases for a vocabulary file (`.inp` texts, `.out` ids), read as
    tests/test-tokenizer-0.cpp reads them."""
    texts = vocab.with_name(vocab.name + ".inp").read_text(encoding="utf-8")
    ids = vocab.with_name(vocab.name + ".out").read_text(encoding="utf-8").splitlines()
    inputs = texts.split("\n__ggml_vocab_test__\n")
    if inputs and inputs[-1] == "":
        inputs.pop()
    assert len(inputs) == len(ids), f"{vocab.name}: {len(inputs)} texts, {len(ids)} answers"
    return [(text, [int(i) for i in line.split()]) for text, line in zip(inputs, ids, strict=True)]
