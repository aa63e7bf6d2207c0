"""The GPU check's payload: a trimmed llama.cpp source, the llama_cpp package, wheels.

What packaging/gpu_check needs on a machine that fetches nothing: a trimmed copy of the
llama.cpp that llama-cpp-python vendors, its Python package, and the wheels the run needs
that the device image lacks.

Usage:
    python tools/gpu_check_payload.py [--dest build/gpu-check/payload] [--python-version 3.12]

Writes into ~/.cache/specchat/gpu-check/payload-<hash>/ (reused when the sources and the
wheel list are unchanged) and copies it to --dest, an ignored folder of the checkout that a
device run carries (`carry: ["build/gpu-check/payload"]`). Prints the folder and its size.

The source tarball keeps what building libllama needs (CMake files, include/, src/, ggml's
core with its CPU and CUDA backends, vendor/ minus cpp-httplib) and drops the rest: models/,
docs/, tests/, examples/, tools/, common/, the other backends. The wheels are downloaded
for CPython `--python-version` on manylinux x86-64, each at the version installed here.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLAMA_VERSION = os.environ.get("LLAMA_VERSION", "0.3.36")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specchat"
DEFAULT_DEST = ROOT / "build" / "gpu-check" / "payload"

#: Distributions the check imports that the device image (Python 3.12 with numpy, jinja2,
#: huggingface-hub) lacks: llama_cpp's own imports, gguf and its imports, SpecChat's paths.
WHEELS = ("diskcache", "typing_extensions", "gguf", "pyyaml", "tqdm", "platformdirs")

#: Parts of vendor/llama.cpp that building libllama reads.
KEEP = ("CMakeLists.txt", "LICENSE", "cmake", "include", "src", "ggml", "vendor", "licenses")
#: ggml/src/ggml-<backend> folders kept: CPU (always built) and CUDA.
BACKENDS = ("ggml-cpu", "ggml-cuda")
#: Never needed by libllama: only common/ links it.
DROP = ("vendor/cpp-httplib",)

PLATFORMS = (
    "manylinux2014_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_28_x86_64",
)


def sdist_dir() -> Path:
    """The extracted llama-cpp-python sdist (fetched once, as tools/build_llama_tools.sh)."""
    folder = CACHE / "sdist" / f"llama_cpp_python-{LLAMA_VERSION}"
    if (folder / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        return folder
    tarball = CACHE / "sdist" / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    if not tarball.exists():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=tarball.parent) as download:
            subprocess.run(
                [
                    *(sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:"),
                    *("--no-deps", "-d", download, f"llama-cpp-python=={LLAMA_VERSION}"),
                ],
                check=True,
            )
            os.replace(Path(download) / tarball.name, tarball)
    with tarfile.open(tarball) as archive:
        archive.extractall(tarball.parent, filter="data")
    return folder


def kept(relative: Path) -> bool:
    """Whether a file of vendor/llama.cpp goes into the trimmed copy."""
    parts = relative.parts
    if parts[0] not in KEEP or "__pycache__" in parts:
        return False
    text = relative.as_posix()
    if any(text == drop or text.startswith(drop + "/") for drop in DROP):
        return False
    if parts[:2] == ("ggml", "src") and len(parts) > 3 and parts[2].startswith("ggml-"):
        return parts[2] in BACKENDS
    return True


def source_files(sdist: Path) -> list[tuple[str, Path]]:
    """(name in the tarball, file) for the trimmed llama.cpp and the llama_cpp package."""
    files = []
    llama = sdist / "vendor" / "llama.cpp"
    for path in sorted(llama.rglob("*")):
        if path.is_file() and kept(path.relative_to(llama)):
            files.append((f"llama.cpp/{path.relative_to(llama).as_posix()}", path))
    package = sdist / "llama_cpp"
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package)
        if path.is_file() and relative.parts[0] not in ("lib", "server", "__pycache__"):
            files.append((f"llama_cpp/{relative.as_posix()}", path))
    return files


def source_tarball(files: list[tuple[str, Path]]) -> bytes:
    """An xz tarball of `files`, the same bytes for the same files (fixed times and owners)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=9) as archive:
        for name, path in files:
            info = tarfile.TarInfo(name)
            data = path.read_bytes()
            info.size = len(data)
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def wheel_pins() -> list[str]:
    """Each wheel at the version installed here (what the tests run with)."""
    return [f"{name}=={metadata.version(name)}" for name in WHEELS]


def download_wheels(folder: Path, pins: list[str], python_version: str) -> None:
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:"),
            *("--implementation", "cp", "--python-version", python_version, *platforms),
            *("-d", str(folder), *pins),
        ],
        check=True,
    )


def prepare(*, python_version: str = "3.12") -> Path:
    """The cached payload folder for these sources and wheels (made if missing)."""
    files = source_files(sdist_dir())
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    pins = wheel_pins()
    digest.update(json.dumps([pins, python_version]).encode())
    source_hash = digest.hexdigest()[:16]
    folder = CACHE / "gpu-check" / f"payload-{source_hash}"
    if (folder / "manifest.json").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".payload-", dir=folder.parent))
    tarball = partial / "llama-src.tar.xz"
    tarball.write_bytes(source_tarball(files))
    download_wheels(partial / "wheels", pins, python_version)
    manifest = {
        "llama_cpp_python": LLAMA_VERSION,
        "source_hash": hashlib.sha256(tarball.read_bytes()).hexdigest()[:16],
        "source_files": len(files),
        "python_version": python_version,
        "wheels": sorted(p.name for p in (partial / "wheels").glob("*.whl")),
    }
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(partial, folder)
    return folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST)
    parser.add_argument("--python-version", default="3.12")
    args = parser.parse_args()
    cached = prepare(python_version=args.python_version)
    shutil.rmtree(args.dest, ignore_errors=True)
    shutil.copytree(cached, args.dest)
    print(f"{args.dest} ({folder_bytes(args.dest) / 2**20:.1f} MiB, cached in {cached})")


if __name__ == "__main__":
    main()
