"""ggml's compute backends: loaded from llama_cpp's own folder, and named for reports."""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp.llama_cpp as llama_lib
from llama_cpp._ctypes_extensions import load_shared_library

#: ggml's device types (enum ggml_backend_dev_type): CPU, GPU, integrated GPU, accelerator.
_DEVICE_CPU = 0
#: A CPU variant library: libggml-cpu-haswell.so, ggml-cpu-sse42.dll, libggml-cpu-zen4.so.
_VARIANT = re.compile(r"(?:lib)?ggml-cpu-(?P<name>[\w.]+)\.(?:so|dll|dylib)$")
#: What reports say when llama.cpp was built with its CPU kernels linked in.
BUILT_IN = "native (built-in)"

_lock = threading.Lock()
_loaded: Backends | None = None


@dataclass(frozen=True)
class Backends:
    """The compute backends llama.cpp runs on in this process.

    Attributes:
        cpu: the CPU kernels in use: the variant chosen for this CPU at start ('haswell',
            from libggml-cpu-haswell.so), `BUILT_IN` when they are linked into llama.cpp,
            or "" when none could be loaded (llama.cpp then cannot load a model).
        variants: the CPU variants beside llama.cpp to choose from; empty when built in.
        devices: the other devices llama.cpp can use, by backend name ('CUDA', 'Metal').
    """

    cpu: str
    variants: tuple[str, ...]
    devices: tuple[str, ...]

    def describe(self) -> str:
        """One line for people: 'CPU kernels haswell (chosen from 14 variants)'."""
        if not self.cpu:
            text = f"no CPU kernels loaded (variants found: {len(self.variants)})"
        elif self.variants:
            text = f"CPU kernels {self.cpu} (chosen from {len(self.variants)} variants)"
        else:
            text = f"CPU kernels {self.cpu}"
        return text + (f"; GPU {', '.join(self.devices)}" if self.devices else "")


def lib_dir() -> Path:
    """The folder llama_cpp loads libllama from (LLAMA_CPP_LIB_PATH when set)."""
    return Path(llama_lib._base_path)


def _ggml(name: str, restype: type | None, *argtypes: type) -> Any:
    # On Linux and macOS dlsym through libllama's handle also searches what it links,
    # libggml among them, so no file name is needed (the bundle keeps libggml under its
    # SONAME only). Windows looks in the named DLL alone.
    try:
        function = getattr(llama_lib._lib, name)
    except AttributeError:
        function = getattr(load_shared_library("ggml", lib_dir()), name)
    function.restype = restype
    function.argtypes = argtypes
    return function


#: ggml's functions by name, for the modules that bind more of them (engine/llamacpp/rpc_devices).
ggml_function = _ggml


def _variants(folder: Path) -> tuple[str, ...]:
    found = (_VARIANT.match(path.name) for path in folder.iterdir()) if folder.is_dir() else ()
    return tuple(sorted(match["name"] for match in found if match))


def _mapped_variant() -> str | None:
    """The variant library this process has mapped (the others were closed after scoring)."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        match = _VARIANT.search(line)
        if match:
            return match["name"]
    return None


def load() -> Backends:
    """Load llama.cpp's backends once per process and say which run; safe from any thread.

    A build with dynamic backends (GGML_BACKEND_DL: the portable bundle) starts with none;
    llama_backend_init would look for them beside the executable (Python's, or the bundle's
    launcher) and in the working directory, never in llama_cpp/lib, and loading a model
    would then fail with "no backends are loaded" (abetlen/llama-cpp-python#2069). Call this
    before llama_backend_init, after setting llama.cpp's log, which reports each load.
    """
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def _load() -> Backends:
    count = _ggml("ggml_backend_reg_count", ctypes.c_size_t)
    if count():
        return Backends(cpu=BUILT_IN, variants=(), devices=_devices())
    folder = lib_dir()
    _ggml("ggml_backend_load_all_from_path", None, ctypes.c_char_p)(str(folder).encode())
    by_type = _ggml("ggml_backend_dev_by_type", ctypes.c_void_p, ctypes.c_int)
    # Which file won is only visible in what the process has mapped (Linux); elsewhere the
    # report says a variant was chosen without naming it.
    cpu = (_mapped_variant() or "chosen at start") if by_type(_DEVICE_CPU) else ""
    return Backends(cpu=cpu, variants=_variants(folder), devices=_devices())


def _devices() -> tuple[str, ...]:
    dev_count = _ggml("ggml_backend_dev_count", ctypes.c_size_t)
    dev_get = _ggml("ggml_backend_dev_get", ctypes.c_void_p, ctypes.c_size_t)
    dev_type = _ggml("ggml_backend_dev_type", ctypes.c_int, ctypes.c_void_p)
    dev_reg = _ggml("ggml_backend_dev_backend_reg", ctypes.c_void_p, ctypes.c_void_p)
    reg_name = _ggml("ggml_backend_reg_name", ctypes.c_char_p, ctypes.c_void_p)
    names: list[str] = []
    for index in range(dev_count()):
        device = dev_get(index)
        if dev_type(device) == _DEVICE_CPU:
            continue
        name = (reg_name(dev_reg(device)) or b"?").decode("utf-8", errors="replace")
        if name not in names:
            names.append(name)
    return tuple(names)
