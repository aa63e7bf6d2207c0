"""The GPU check in one script: SpecChat's costs, replays and exactness on the GPU found.

Builds libllama for that GPU, writes real-shape synthetic models, measures their cost
tables, re-prices the recorded traces, checks exactness and reports.

Usage (on a machine with an NVIDIA GPU and nvcc; with neither it runs on the CPU):
    python3 packaging/gpu_check/run.py [--out DIR] [--payload DIR] [--budget SECONDS]
                                       [--small] [--pairs NAME,...] [--jobs N] [--lib DIR]

The payload (a trimmed llama.cpp source, the llama_cpp package, wheels) comes from
`make gpu-check-payload` (build/gpu-check/payload). Everything is written to --out ($OUT
when set): report.json, report.md, costs-<pair>.json (SpecChat cost files: `specchat bench
--replay ROUNDS --costs FILE` takes them) and check.log. Each step runs timed in a process
of its own; one that fails is reported with its error and the rest go on. --budget bounds
the whole run (a step left without time is reported skipped). --small: tiny shapes and few
sizes, the same code path, for a CPU (`make test-package` runs it so).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_check import report, toolchain
from gpu_check.pairs import PAIRS, REPO
from gpu_check.steps import StepResult, in_child, in_process, skipped

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specchat" / "gpu-check"
#: Seconds kept back at the end for the report; a step is not started with less than
#: MIN_STEP left.
RESERVE, MIN_STEP = 10.0, 15.0
#: Seconds the pairs leave for the replay at the end (re-pricing the three recorded sets
#: under four tables takes about a minute on a 2-core CPU).
REPLAY_SECONDS, SMALL_REPLAY_SECONDS = 60.0, 15.0


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    out = os.environ.get("OUT")
    parser.add_argument("--out", type=Path, default=Path(out) if out else Path("gpu-check-out"))
    parser.add_argument("--payload", type=Path, default=REPO / "build" / "gpu-check" / "payload")
    parser.add_argument("--work", type=Path, default=CACHE / "work", help="models, scratch")
    parser.add_argument("--cache", type=Path, default=CACHE, help="unpacked sources, builds")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the run")
    parser.add_argument("--small", action="store_true", help="tiny shapes, few sizes (CPU)")
    parser.add_argument("--pairs", default=",".join(p.name for p in PAIRS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    parser.add_argument("--threads", type=int, default=0, help="decode threads (0: auto)")
    parser.add_argument("--cuda-arch", default="", help="CMAKE_CUDA_ARCHITECTURES (e.g. 90a)")
    parser.add_argument("--cpu", action="store_true", help="build for the CPU even with a GPU")
    parser.add_argument(
        "--lib", type=Path, help="a folder holding a libllama built elsewhere: no build step"
    )
    args = parser.parse_args()
    unknown = set(args.pairs.split(",")) - {p.name for p in PAIRS}
    if unknown:
        parser.error(
            f"no pair {', '.join(sorted(unknown))} (there are {parser.get_default('pairs')})"
        )
    return args


def machine(gpu: toolchain.Gpu | None, args: argparse.Namespace) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "gpu": f"{gpu.name} (sm_{gpu.arch}, {gpu.memory})" if gpu else "none (CPU build)",
        "n_gpu_layers": "-1 (every layer offloaded)" if gpu else "-1 (a CPU build offloads none)",
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "shapes": "tiny (--small)" if args.small else "real",
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def main() -> int:
    args = options()
    began = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    log = args.out / "check.log"
    log.write_text("", encoding="utf-8")
    for old in args.out.glob("costs-*.json"):
        old.unlink()  # an earlier run's table would be replayed as this machine's
    gpu = None if args.cpu else toolchain.find_gpu()
    if gpu is not None and args.cuda_arch:
        gpu = dataclasses.replace(gpu, arch=args.cuda_arch)
    facts = machine(gpu, args)
    steps: list[StepResult] = []

    def left() -> float:
        return args.budget - (time.perf_counter() - began) - RESERVE

    def record(step: StepResult) -> StepResult:
        steps.append(step)
        report.write(args.out, facts, steps)
        print(f"{step.name:<24} {step.status:<8} {step.seconds:7.1f} s  {step.error[:100]}")
        return step

    # Wheels installed for this interpreter only (a cp312 wheel is no use to another).
    site = args.cache / f"site-py{sys.version_info[0]}{sys.version_info[1]}"
    found: dict[str, Any] = {}

    def prepare() -> dict[str, Any]:
        found["source"] = toolchain.unpack(args.payload, args.cache)
        installed = toolchain.install_wheels(args.payload, site)
        payload = sum(p.stat().st_size for p in args.payload.rglob("*") if p.is_file())
        return {
            "source": found["source"].name,
            "payload_mib": round(payload / 2**20, 2),
            "wheels_installed": installed,
        }

    def build() -> dict[str, Any]:
        if args.lib is not None:
            lib, info = toolchain.prebuilt(args.lib.resolve())
        else:
            lib, info = toolchain.build(
                found["source"], args.cache, gpu=gpu, jobs=args.jobs, log=log, timeout=left()
            )
        found["lib"] = lib
        return info

    if record(in_process("payload", prepare, log=log)).status == "ok":
        record(in_process("build", build, log=log))
    if "lib" not in found:
        record(skipped("everything else", "no libllama was built"))
        return 1

    env = toolchain.step_env(repo=REPO, source=found["source"], site=site, lib=found["lib"])
    env["GPU_CHECK_DEVICE"] = facts["gpu"] if gpu else f"CPU ({facts['cpu']})"
    threads = args.threads or (2 if args.small else min(os.cpu_count() or 2, 8))
    common = ["--work", str(args.work), "--out", str(args.out), "--threads", str(threads)]
    common += ["--small"] if args.small else []

    def child(name: str, module: str, *extra: str, keep: float = 0.0) -> StepResult:
        """Run a step with the time left, less `keep` seconds for the steps after it."""
        seconds = left() - keep
        if seconds < MIN_STEP:
            return record(skipped(name, "time budget spent"))
        return record(
            in_child(
                name,
                module,
                [*common, "--seconds", f"{seconds:.0f}", *extra],
                env=env,
                results=args.work / "results",
                log=log,
                timeout=seconds,
            )
        )

    replay = SMALL_REPLAY_SECONDS if args.small else REPLAY_SECONDS
    device = child("device", "device", keep=replay)
    if device.status != "ok":
        # llama.cpp itself cannot run here: every later step would fail the same way.
        record(skipped("everything else", "llama.cpp could not decode on the device"))
        child("replay", "replay")
        return 1
    # The later steps run as the try that decoded (the CUDA backend's variables it set).
    env.update(device.data.get("env", {}))
    facts["device try"] = device.data.get("try", "")
    child("exactness", "exactness", keep=replay)
    wanted = set(args.pairs.split(","))
    for pair in (p for p in PAIRS if p.name in wanted):
        named = ("--pair", pair.name)
        if child(f"models:{pair.name}", "models", *named, keep=replay).status != "ok":
            continue
        child(f"costs:{pair.name}", "costs", *named, keep=replay)
        child(f"noise:{pair.name}", "noise", *named, keep=replay)
    child("replay", "replay")
    return 0 if all(step.status == "ok" for step in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
