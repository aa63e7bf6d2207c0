"""The GPU check (packaging/gpu_check) runs end to end on the CPU with tiny shapes, and its
payload travels with the tree within the device machine's carry limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from specchat.engine.costs.machine import MachineCosts

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = ROOT / "build" / "gpu-check" / "payload"
#: What a device run may carry: the working tree and the carried paths together.
CARRY_LIMIT = 64 * 2**20
#: Every step of a run over every pair.
PAIRS = ("llama-8b", "qwen2.5-1.5b", "qwen3.5-4b", "gemma4-e2b")
STEPS = [
    "payload",
    "build",
    "device",
    "exactness",
    *(f"{step}:{pair}" for pair in PAIRS for step in ("models", "costs", "noise")),
    "replay",
]


@pytest.fixture(scope="module")
def payload() -> Path:
    """The payload `make gpu-check-payload` made (made here where it has not run)."""
    if not (PAYLOAD / "manifest.json").exists():
        subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_check_payload.py")], check=True)
    return PAYLOAD


def _tree_bytes() -> int:
    """The working tree as the device machine gets it: tracked files and untracked ones git
    does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum(
        (ROOT / os.fsdecode(n)).stat().st_size
        for n in names
        if n and (ROOT / os.fsdecode(n)).is_file()
    )


def test_the_payload_fits_beside_the_tree_under_the_carry_limit(payload: Path) -> None:
    carried = sum(p.stat().st_size for p in payload.rglob("*") if p.is_file())
    assert carried + _tree_bytes() < CARRY_LIMIT, (
        f"payload {carried / 2**20:.1f} MiB + tree {_tree_bytes() / 2**20:.1f} MiB"
    )
    manifest = json.loads((payload / "manifest.json").read_text(encoding="utf-8"))
    assert any(w.startswith("gguf-") for w in manifest["wheels"])
    # Nothing built for another interpreter than the device's Python 3.12.
    assert all("-py3-none-" in w or "-cp312-" in w for w in manifest["wheels"])


def test_the_source_keeps_libllama_and_the_cuda_backend_and_drops_the_rest(payload: Path) -> None:
    with tarfile.open(payload / "llama-src.tar.xz") as archive:
        names = archive.getnames()
    assert "llama.cpp/CMakeLists.txt" in names and "llama_cpp/llama_cpp.py" in names
    assert any(n.startswith("llama.cpp/ggml/src/ggml-cuda/template-instances/") for n in names)
    assert any(n.startswith("llama.cpp/src/models/") for n in names)  # the graphs, kept
    dropped = (
        "models/",
        "docs/",
        "tests/",
        "examples/",
        "tools/",
        "common/",
        "ggml/src/ggml-vulkan/",
    )
    assert not [n for n in names if n.startswith(tuple(f"llama.cpp/{d}" for d in dropped))]


def _check(
    payload: Path, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the check with tiny shapes on the CPU; its process and its report."""
    out = tmp_path / "out"
    run = subprocess.run(
        [
            *(sys.executable, str(ROOT / "packaging" / "gpu_check" / "run.py"), "--small"),
            *("--out", str(out), "--payload", str(payload), "--jobs", "2", "--budget", "3000"),
            # Models written afresh; the build stays cached in the user cache.
            *("--work", str(tmp_path / "work"), *extra),
        ],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "OUT"}, **(env or {})},
    )
    return run, json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.mark.timeout(3600)  # the first run builds libllama (cached by source hash after)
def test_the_check_runs_on_the_cpu_and_reports_every_step(payload: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run, report = _check(payload, tmp_path)
    steps = {step["name"]: step for step in report["steps"]}
    failed = {
        name: s["error"] + s["log_tail"][-800:] for name, s in steps.items() if s["status"] != "ok"
    }
    assert not failed, failed
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(steps) == STEPS
    # Every step timed (a cached build takes no time at all).
    assert all(step["seconds"] >= 0 for step in report["steps"])
    assert steps["build"]["data"]["backend"] == "cpu"
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# SpecChat GPU check")

    for pair in PAIRS:
        # Each table is a cost file SpecChat's replay reads, with every size it was asked for.
        costs = MachineCosts.read(out / f"costs-{pair}.json")
        assert sorted(costs.target.pass_ms) == list(range(1, 9))
    assert steps["costs:qwen3.5-4b"]["data"]["heads_ms"].keys() == {"mtp"}
    assert steps["costs:gemma4-e2b"]["data"]["heads_ms"].keys() == {"assistant"}
    assert steps["costs:llama-8b"]["data"]["draft_ms"] > 0

    # llama.cpp alone decodes the tiny target (a CPU build offloads nothing: the same
    # tokens twice), with llama.cpp's own log in check.log.
    device = steps["device"]["data"]
    assert device["devices"] == [] and device["same_tokens"]
    assert len(device["greedy_cpu"]) == 8
    log = (out / "check.log").read_text(encoding="utf-8")
    assert "llama_model_loader: loaded meta data" in log

    exact = steps["exactness"]["data"]
    assert exact["identical"] == exact["cases"] > 0
    assert sum(c["accepted"] for c in exact["tiny_hybrid"]["cases"]) > 0
    # The CPU's batches round alike: the near-tie margin stays the floor.
    for model in ("tiny_pair", "tiny_hybrid"):
        assert exact[model]["near_tie"] == 0.1 and max(exact[model]["noise"].values()) < 0.01
    assert "a near tie below a margin of 0.1" in (out / "report.md").read_text(encoding="utf-8")

    tables = steps["replay"]["data"]["tables"]
    assert set(tables) == {"llama-8b", "qwen2.5-1.5b", "qwen3.5-4b", "shipped-gpu"}
    for rows in tables.values():
        for name in ("shipped", "everyday", "held-out"):
            assert rows[name]["answers"] == 2
            assert rows[name]["auto_speedup"] > 0


@pytest.mark.timeout(3600)
def test_a_failing_step_is_reported_and_the_rest_go_on(payload: Path, tmp_path: Path) -> None:
    # A draft model file that is not a GGUF: the llama-8b pair's steps that load it fail.
    broken = tmp_path / "work" / "models-small" / "llama-1b-Q4_0.gguf"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a model")
    run, report = _check(payload, tmp_path, "--pairs", "llama-8b,gemma4-e2b")
    steps = {step["name"]: step for step in report["steps"]}
    assert run.returncode == 1
    assert steps["costs:llama-8b"]["status"] == "failed"
    assert "llama-1b-Q4_0.gguf" in steps["costs:llama-8b"]["log_tail"]
    assert steps["costs:llama-8b"]["error"]
    after = ["noise:llama-8b", "models:gemma4-e2b", "costs:gemma4-e2b", "replay"]
    assert [steps[name]["status"] for name in after] == ["failed", "ok", "ok", "ok"]
    # The replay went on with the tables there were.
    assert set(steps["replay"]["data"]["tables"]) == {"shipped-gpu"}
    assert "## Failures" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


@pytest.mark.timeout(3600)
def test_a_library_built_elsewhere_is_used_without_a_build(payload: Path, tmp_path: Path) -> None:
    # The CPU build the first test made (cached by source hash), named as if carried in.
    built = [p for p in (Path.home() / ".cache" / "specchat" / "gpu-check").glob("build-*/bin")]
    cpu = [p for p in built if (p.parent / ".built").exists() and (p / "libllama.so").exists()]
    if not cpu:
        _check(payload, tmp_path / "first", "--pairs", "gemma4-e2b")
        cpu = [p for p in Path.home().glob(".cache/specchat/gpu-check/build-*/bin")]
    run, report = _check(payload, tmp_path, "--pairs", "gemma4-e2b", "--lib", str(cpu[0]))
    steps = {step["name"]: step for step in report["steps"]}
    assert run.returncode == 0, run.stdout + run.stderr
    build = steps["build"]["data"]
    assert build["backend"] == "prebuilt" and build["build_dir"] == str(cpu[0].resolve())
    assert "libllama.so" in build["libraries"] and "GGML_NATIVE=ON" in build["options"]
    assert steps["device"]["status"] == steps["exactness"]["status"] == "ok"


def _crashing_site(folder: Path, when: str = "True") -> Path:
    """A sitecustomize that dereferences a null pointer when `when` holds: a process dies
    of SIGSEGV before a step's own code runs, as a crash inside llama.cpp would end it."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        f"import ctypes, os, sys\n\ndef fall_over():\n    ctypes.string_at(0)\n\nif {when}:\n"
        "    fall_over()\n"
    )
    return folder


@pytest.mark.timeout(3600)
def test_a_device_llama_cpp_cannot_use_stops_the_check_early(payload: Path, tmp_path: Path) -> None:
    # Every try of the device step dies as a crash inside llama.cpp would end it.
    crash = _crashing_site(tmp_path / "crash", "'--probe' in sys.argv")
    run, report = _check(payload, tmp_path, env={"PYTHONPATH": str(crash)})
    steps = {step["name"]: step for step in report["steps"]}
    assert run.returncode == 1
    assert list(steps) == ["payload", "build", "device", "everything else", "replay"]
    device = steps["device"]
    assert device["status"] == "failed" and "in any try" in device["error"]
    assert list(device["data"]["tried"].values()) == ["exit status -11"] * 4
    assert "Segmentation fault" in device["log_tail"]
    assert steps["everything else"]["status"] == "skipped"
    assert steps["replay"]["status"] == "ok"  # the shipped table is still re-priced


@pytest.mark.timeout(3600)
def test_the_first_device_try_that_decodes_is_what_every_later_step_runs_with(
    payload: Path, tmp_path: Path
) -> None:
    # llama.cpp crashes unless pinned host buffers are off: the second try decodes, and
    # the exactness step (which crashes likewise without it) passes.
    crash = _crashing_site(
        tmp_path / "crash",
        "not os.environ.get('GGML_CUDA_NO_PINNED')"
        " and any(a.endswith(('-try.json', 'exactness.json')) for a in sys.argv)",
    )
    run, report = _check(payload, tmp_path, "--pairs", "gemma4-e2b", env={"PYTHONPATH": str(crash)})
    steps = {step["name"]: step for step in report["steps"]}
    assert run.returncode == 0, run.stdout + run.stderr
    device = steps["device"]["data"]
    assert device["tried"] == {"as built": "exit status -11", "no pinned host buffers": "ok"}
    assert device["env"] == {"GGML_CUDA_NO_PINNED": "1"}
    assert report["machine"]["device try"] == "no pinned host buffers"
    assert steps["exactness"]["status"] == "ok"


def test_a_step_that_crashes_leaves_its_python_stack_in_the_log(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        from gpu_check.steps import in_child
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    crash = _crashing_site(tmp_path / "crash")
    log = tmp_path / "check.log"
    step = in_child(
        "device",
        "device",
        ["--work", str(tmp_path), "--out", str(tmp_path)],
        env={"PYTHONPATH": os.pathsep.join([str(crash), str(ROOT / "packaging")])},
        results=tmp_path / "results",
        log=log,
        timeout=60,
    )
    assert step.status == "failed" and step.error == "exit status -11"
    assert "Segmentation fault" in step.log_tail
    assert 'sitecustomize.py", line 4 in fall_over' in step.log_tail
