"""llama.cpp's process-wide set-up: the backend, its log kept to explain failures, the build."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections import deque

import llama_cpp

from specchat import ggml_backends

log = logging.getLogger(__name__)

_init_lock = threading.Lock()
_initialised = False
_echo = False
#: The last lines llama.cpp logged, to explain a failed load ("unknown pre-tokenizer ...").
_recent_log: deque[str] = deque(maxlen=40)
#: ggml's log level for errors (enum ggml_log_level: NONE, DEBUG, INFO, WARN, ERROR, CONT).
_GGML_LOG_LEVEL_ERROR = 4
#: Set (to anything but "" or "0") to have llama.cpp's whole log written to standard error
#: as it comes: what a device did before a crash that leaves no Python error behind.
ECHO_LOG_VARIABLE = "SPECCHAT_LLAMA_LOG"


def _echo_wanted() -> bool:
    return os.environ.get(ECHO_LOG_VARIABLE, "") not in ("", "0")


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
def _on_llama_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # An exception raised here would be printed by ctypes for every log line: never raise.
    try:
        decoded = text.decode("utf-8", errors="replace")
        if _echo:
            sys.stderr.write(decoded)
            sys.stderr.flush()
        line = decoded.rstrip()
        if line:
            _recent_log.append(line)
        if level == _GGML_LOG_LEVEL_ERROR:
            log.debug("llama.cpp: %s", line)
    except Exception:
        pass


def ensure_backend() -> None:
    """Initialise llama.cpp once per process and take over its log."""
    global _initialised, _echo
    with _init_lock:
        if not _initialised:
            _echo = _echo_wanted()
            # Route llama.cpp's chatter away from the terminal; keep it to explain errors.
            llama_cpp.llama_log_set(_on_llama_log, ctypes.c_void_p(0))
            ggml_backends.load()
            llama_cpp.llama_backend_init()
            _initialised = True


def compute_backends() -> ggml_backends.Backends:
    """The CPU kernels and devices llama.cpp runs on here, once it is initialised."""
    ensure_backend()
    return ggml_backends.load()


def build_line() -> str:
    """llama-cpp-python's version and what it runs on, for --version and the self-test."""
    return f"llama-cpp-python {llama_cpp.__version__}: {compute_backends().describe()}"


def forget_log() -> None:
    """Start a fresh log: what is logged from now on explains the next failure."""
    _recent_log.clear()


def last_error_line() -> str:
    """The reason llama.cpp last logged for a failure, for people; "" when it gave none."""
    for line in _recent_log:
        marker = "error loading model:"
        if marker in line:
            reason = line.split(marker, 1)[1].strip()
            return reason.replace("llama_model_loader: ", "")
    for line in reversed(_recent_log):
        if "error" in line.lower() or "failed" in line.lower():
            return line.split(":", 1)[-1].strip() if ": " in line else line
    return ""


def system_info() -> str:
    """llama.cpp's own line on what this build and CPU support (AVX2, CUDA...)."""
    ensure_backend()
    info: bytes = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", errors="replace")


def gpu_backend_name() -> str | None:
    """'CUDA', 'Metal', 'Vulkan'... when this llama.cpp build can offload, else None."""
    ensure_backend()
    # llama_supports_gpu_offload is also true for a CPU build with the RPC backend (its
    # devices are other machines'): only a device of this machine's own counts here.
    if not llama_cpp.llama_supports_gpu_offload() or not compute_backends().devices:
        return None
    info = system_info()
    for name in ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL"):
        if name.upper() in info.upper():
            return name
    return "GPU"


#: Below this file size a model runs on one thread (see default_threads).
SMALL_MODEL_BYTES = 64 * 1024 * 1024


def default_threads(model_bytes: int | None = None) -> int:
    """Physical cores are what llama.cpp scales with; hyper-threads only add contention.

    A model under SMALL_MODEL_BYTES gets one thread: each of its operations is too little
    work to split, llama.cpp's threads meet after every one, and a thread that finds a core
    busy waits out the other program's time slice at each meeting (docs/costs.md, "Threads").
    """
    if model_bytes is not None and model_bytes < SMALL_MODEL_BYTES:
        return 1
    count = os.cpu_count() or 2
    return max(1, count // 2) if count > 4 else count
