"""The payload unpacked, missing wheels installed, libllama built (cached by source hash)."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Modules the later steps import, and the wheel that brings each.
NEEDED = {
    "diskcache": "diskcache",
    "typing_extensions": "typing_extensions",
    "gguf": "gguf",
    "yaml": "pyyaml",
    "tqdm": "tqdm",
    "platformdirs": "platformdirs",
}

#: libllama's build: the library and its ggml backends only, as llama-cpp-python builds it.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_COMMON=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=ON",
)


#: The options of a prebuilt library's build the report lists (its CMakeCache.txt's keys).
BUILD_OPTIONS: tuple[str, ...] = (
    *("GGML_CUDA", "GGML_NATIVE", "GGML_AVX", "GGML_FMA", "GGML_F16C", "GGML_BMI2"),
    *("CMAKE_CUDA_ARCHITECTURES:", "CMAKE_BUILD_TYPE:"),
)

#: Where CUDA's installer puts nvcc when the PATH does not name it.
CUDA_NVCC = Path("/usr/local/cuda/bin/nvcc")


@dataclass(frozen=True)
class Gpu:
    """The NVIDIA GPU found.

    Attributes:
        name: as nvidia-smi names it.
        arch: CMAKE_CUDA_ARCHITECTURES for it ("90" for compute capability 9.0).
        memory: its memory, as nvidia-smi says it.
        nvcc: the CUDA compiler to build with.
    """

    name: str
    arch: str
    memory: str
    nvcc: str = "nvcc"


def find_gpu() -> Gpu | None:
    """The first NVIDIA GPU, where nvidia-smi and nvcc are both there; None otherwise."""
    nvcc = shutil.which("nvcc") or (str(CUDA_NVCC) if CUDA_NVCC.exists() else None)
    if shutil.which("nvidia-smi") is None or nvcc is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line for line in out.splitlines() if line.strip()]
    if not lines:
        return None
    name, cap, memory = (part.strip() for part in lines[0].split(",", 2))
    return Gpu(name=name, arch=cap.replace(".", ""), memory=memory, nvcc=nvcc)


def unpack(payload: Path, work: Path) -> Path:
    """The payload's sources unpacked into `work` (once per source hash); their folder,
    holding llama.cpp/ and llama_cpp/."""
    manifest = json.loads((payload / "manifest.json").read_text(encoding="utf-8"))
    folder = work / f"src-{manifest['source_hash']}"
    if not (folder / ".unpacked").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with tarfile.open(payload / "llama-src.tar.xz") as archive:
            archive.extractall(folder, filter="data")
        (folder / ".unpacked").touch()
    return folder


def install_wheels(payload: Path, site: Path) -> list[str]:
    """Install into `site` the payload's wheels whose modules this Python lacks (none on a
    development machine: its own versions are the ones the wheels were pinned to); returns
    the wheels installed."""
    wanted = sorted({wheel for module, wheel in NEEDED.items() if not _importable(module)})
    if not wanted:
        return []
    wheels = [
        str(path)
        for path in sorted((payload / "wheels").glob("*.whl"))
        if _dist_name(path) in wanted
    ]
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"),
            *("--no-compile", "--no-cache-dir", "--upgrade", "--target", str(site), *wheels),
        ],
        check=True,
    )
    return [Path(wheel).name for wheel in wheels]


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _dist_name(wheel: Path) -> str:
    return wheel.name.split("-")[0].lower()


def build(
    source: Path, cache: Path, *, gpu: Gpu | None, jobs: int, log: Path, timeout: float
) -> tuple[Path, dict[str, Any]]:
    """libllama and its ggml libraries from `source`, with CUDA for `gpu` (the CPU alone
    without one), in a build folder named by the source's hash and the backend, so a
    second run builds nothing (and one stopped after `timeout` seconds goes on where it
    stopped). Returns the folder holding libllama.so, and what was built."""
    backend = f"cuda-sm{gpu.arch}" if gpu else "cpu"
    key = hashlib.sha256(f"{source.name}/{backend}/{' '.join(CMAKE_FLAGS)}".encode()).hexdigest()
    tree = cache / f"build-{key[:16]}"
    lib = tree / "bin"
    info = {"backend": backend, "build_dir": str(tree), "cached": True}
    if (tree / ".built").exists():
        return lib, info
    cache.mkdir(parents=True, exist_ok=True)
    # One build at a time (two test processes may ask at once); the second finds it built.
    with (cache / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tree / ".built").exists():
            info["cached"] = False
            _cmake(source, tree, gpu=gpu, jobs=jobs, log=log, timeout=timeout)
    info["libraries"] = sorted(p.name for p in lib.glob("*.so"))
    return lib, info


def _cmake(
    source: Path, tree: Path, *, gpu: Gpu | None, jobs: int, log: Path, timeout: float
) -> None:
    """Configure and build the `llama` target in `tree`, and mark it built."""
    flags = list(CMAKE_FLAGS)
    if gpu is not None:
        flags += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={gpu.arch}"]
        flags += [f"-DCMAKE_CUDA_COMPILER={gpu.nvcc}"]
    if shutil.which("ninja"):
        flags += ["-G", "Ninja"]
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n=== build in {tree}: {' '.join(flags)}\n")
        out.flush()
        subprocess.run(
            ["cmake", "-S", str(source / "llama.cpp"), "-B", str(tree), *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
        )
        subprocess.run(
            ["cmake", "--build", str(tree), "--target", "llama", "-j", str(jobs)],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=max(1.0, timeout),
        )
    (tree / ".built").touch()


def step_env(*, repo: Path, source: Path, site: Path, lib: Path) -> dict[str, str]:
    """The environment of every step after the build: this checkout's specchat and the
    check's own modules, the payload's llama_cpp package and wheels, the library built."""
    paths = [repo / "packaging", repo / "app", source, site]
    return {
        "PYTHONPATH": _prepend("PYTHONPATH", *map(str, paths)),
        "LLAMA_CPP_LIB_PATH": str(lib),
        # libllama's own ggml libraries, wherever the library was built (one carried from
        # another machine keeps that machine's run path).
        "LD_LIBRARY_PATH": _prepend("LD_LIBRARY_PATH", str(lib)),
        "PYTHONUNBUFFERED": "1",
        # The source tree's llama_cpp holds no compiled files: never write any beside it.
        "PYTHONDONTWRITEBYTECODE": "1",
        # llama.cpp's log into check.log as it comes: what a device did before a crash.
        "SPECCHAT_LLAMA_LOG": "1",
    }


def _prepend(variable: str, *paths: str) -> str:
    old = os.environ.get(variable)
    return os.pathsep.join([*paths, *([old] if old else [])])


def prebuilt(lib: Path) -> tuple[Path, dict[str, Any]]:
    """A libllama built elsewhere (`--lib`): its folder, and what the report says of it
    (the build's GGML options, where its CMakeCache.txt sits above the folder)."""
    if not (lib / "libllama.so").exists():
        raise FileNotFoundError(f"no libllama.so in {lib}")
    info: dict[str, Any] = {"backend": "prebuilt", "build_dir": str(lib), "cached": True}
    cache = lib.parent / "CMakeCache.txt"
    if cache.exists():
        options = [
            line.split(":", 1)[0] + "=" + line.split("=", 1)[1]
            for line in cache.read_text(encoding="utf-8", errors="replace").splitlines()
            if line.startswith(BUILD_OPTIONS) and "=" in line and "-STRINGS" not in line
        ]
        info["options"] = [o for o in options if not o.endswith(("=OFF", "="))]
    info["libraries"] = sorted(p.name for p in lib.glob("*.so"))
    return lib, info
