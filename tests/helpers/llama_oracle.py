"""llama.cpp's own speculative decoding, round by round, for checks of SpecChat's drafters.

`run_oracle` runs spec-oracle (tools/llama_oracle/spec_oracle.cpp: llama.cpp's
speculative-simple loop over `common_speculative_*`, built by tools/build_llama_tools.sh
against the llama.cpp our libllama comes from) and reads the JSON lines it prints: one per
pass of its loop, then the generated ids.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tools" / "build_llama_tools.sh"

#: The first build compiles llama.cpp (about 8 minutes on 2 cores); later ones only print.
BUILD_TIMEOUT_S = 3600


@dataclass(frozen=True)
class OracleRound:
    """One pass of llama.cpp's loop: the target checked [the last token, *draft].

    Attributes:
        index: 0-based pass number.
        pos: position of the last token in the target's cache (the first row of the pass).
        draft: the drafted ids, in order.
        accepted: how many of them the target kept.
        ids: what the target's sampler produced: the kept drafts and one token more.
        reused: the draft is the kept part of the previous pass, re-checked from a
            checkpoint (a target whose cache cannot drop tokens), not a drafter's proposal.
        restored: this pass's partial acceptance made the loop restore the checkpoint; its
            ids come back as the next pass's draft.
    """

    index: int
    pos: int
    draft: tuple[int, ...]
    accepted: int
    ids: tuple[int, ...]
    reused: bool = False
    restored: bool = False


@dataclass(frozen=True)
class OracleRun:
    """What spec-oracle printed: its passes and every generated id (an end-of-generation
    token included, as llama.cpp samples it)."""

    rounds: tuple[OracleRound, ...]
    tokens: tuple[int, ...]


@functools.cache
def oracle_binary(target: str = "spec-oracle") -> Path:
    """The path of a harness of tools/llama_oracle (spec-oracle, chat-oracle), built on
    first use (cached across runs in the user cache)."""
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), target],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT.name} failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def run_oracle(
    target: Path,
    prompt: Sequence[int],
    *,
    draft: Path | None = None,
    spec_type: str = "draft-simple",
    k: int = 4,
    n_predict: int = 32,
    n_ctx: int = 1024,
    extra_args: Sequence[str] = (),
    timeout_s: float = 300.0,
) -> OracleRun:
    """llama.cpp's speculative decoding of `prompt` (token ids, at least two) at T = 0,
    one thread, CPU, drafting `k` tokens a round with no confidence cut-off."""
    options = {
        "-m": str(target),
        "--spec-type": spec_type,
        "--spec-draft-n-max": str(k),
        "--spec-draft-n-min": "0",
        "--spec-draft-p-min": "0",
        "--temp": "0",
        "-t": "1",
        "-c": str(n_ctx),
        "-n": str(n_predict),
        "--prompt-ids": ",".join(str(int(t)) for t in prompt),
    }
    if draft is not None:
        options["-md"] = str(draft)
    args = [str(oracle_binary())]
    for name, value in options.items():
        args += [name, value]
    args += list(extra_args)
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"spec-oracle exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return parse_oracle_output(done.stdout)


def parse_oracle_output(text: str) -> OracleRun:
    """The rounds and tokens of spec-oracle's stdout (one JSON object a line)."""
    rounds: list[OracleRound] = []
    tokens: tuple[int, ...] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "tokens" in record:
            tokens = tuple(record["tokens"])
            continue
        rounds.append(
            OracleRound(
                index=record["round"],
                pos=record["pos"],
                draft=tuple(record["draft"]),
                accepted=record["accepted"],
                ids=tuple(record["ids"]),
                reused=record.get("reused", False),
                restored=record.get("restored", False),
            )
        )
    if tokens is None:
        raise ValueError('spec-oracle printed no final {"tokens": ...} line')
    return OracleRun(tuple(rounds), tokens)
