"""The GPU check's exactness step runs against the engine as it is now: it calls the
decoder the way the app does, so it is run in the everyday suite on tiny shapes (the full
check, with its build and payload, is in the package suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP = ROOT / "packaging" / "gpu_check" / "exactness.py"


def test_the_exactness_step_matches_plain_decoding_on_the_cpu(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    argv = [sys.executable, "-m", "gpu_check.exactness", "--small", "--n-gpu-layers", "0"]
    argv += ["--result", str(result), "--work", str(tmp_path), "--out", str(tmp_path)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "packaging"), str(ROOT / "app")]),
    }
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(result.read_text(encoding="utf-8"))
    cases = report["tiny_pair"]["cases"] + report["tiny_hybrid"]["cases"]
    # The CPU's batches round as its single rows do: near ties are judged at the floor.
    assert report["tiny_pair"]["near_tie"] == report["tiny_hybrid"]["near_tie"] == 0.1
    assert {c["mode"] for c in cases} == {"draft", "lookup", "chain", "auto", "mtp"}
    assert all(c["identical"] or c["near_tie"] for c in cases), cases
    assert sum(c["accepted"] for c in cases) > 0
