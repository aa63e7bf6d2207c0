"""llama.cpp's RPC backend through the installed library: other machines' devices added for a
target, and this machine's devices served to others (no separate rpc-server binary).

Both go through ggml's backend registry (`ggml_backend_reg_by_name("RPC")` and its
`get_proc_address`), which finds the backend linked in (a native build with GGML_RPC) and
loaded as libggml-rpc beside llama.cpp (a portable build with GGML_BACKEND_DL) alike.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.engine.llamacpp.backend import ensure_backend
from specchat.engine.llamacpp.rpc_relay import relay_for
from specchat.ggml_backends import ggml_function

#: ggml's device types (enum ggml_backend_dev_type).
_DEVICE_CPU, _DEVICE_GPU, _DEVICE_IGPU, _DEVICE_ACCEL = 0, 1, 2, 3

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
_START_SERVER = ctypes.CFUNCTYPE(
    None,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_size_t,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_void_p),
)


class RpcUnavailable(RuntimeError):
    """This llama.cpp was built without its RPC backend."""


@dataclass(frozen=True)
class Device:
    """One ggml device.

    Attributes:
        handle: its ggml_backend_dev_t.
        name: ggml's name ("CPU", "CUDA0", "RPC0").
        description: what it is ("AMD Ryzen 7", or the server's address for a remote one).
        free: free memory in bytes, as it reports it.
        total: its memory in bytes.
    """

    handle: int
    name: str
    description: str
    free: int
    total: int


def _proc(name: str) -> Any:
    ensure_backend()
    reg = ggml_function("ggml_backend_reg_by_name", ctypes.c_void_p, ctypes.c_char_p)(b"RPC")
    if not reg:
        raise RpcUnavailable(
            "this llama.cpp was built without its RPC backend (rebuild it with -DGGML_RPC=on: "
            "`make` does)"
        )
    get = ggml_function(
        "ggml_backend_reg_get_proc_address", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p
    )
    address = get(reg, name.encode())
    if not address:
        raise RpcUnavailable(f"this llama.cpp's RPC backend has no {name}")
    return address


def check_available() -> None:
    """Raise RpcUnavailable, saying how to get it, unless this llama.cpp has the backend."""
    _proc("ggml_backend_rpc_start_server")


def available() -> bool:
    """Whether this llama.cpp can use and serve other machines' devices."""
    try:
        _proc("ggml_backend_rpc_add_server")
    except RpcUnavailable:
        return False
    return True


def describe(handle: int) -> Device:
    name = ggml_function("ggml_backend_dev_name", ctypes.c_char_p, ctypes.c_void_p)
    description = ggml_function("ggml_backend_dev_description", ctypes.c_char_p, ctypes.c_void_p)
    memory = ggml_function(
        "ggml_backend_dev_memory",
        None,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    )
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    memory(handle, ctypes.byref(free), ctypes.byref(total))
    return Device(
        handle=handle,
        name=(name(handle) or b"?").decode("utf-8", errors="replace"),
        description=(description(handle) or b"").decode("utf-8", errors="replace"),
        free=int(free.value),
        total=int(total.value),
    )


def remote_devices(endpoint: str) -> tuple[Device, ...]:
    """The devices of the server at `endpoint`, reached through its relay (rpc_relay). The
    server must have been checked first (rpc_wire.probe): llama.cpp aborts the process on a
    server it cannot reach."""
    relay = relay_for(endpoint)
    add = _ADD_SERVER(_proc("ggml_backend_rpc_add_server"))
    reg = add(relay.local_endpoint.encode())
    if not reg:
        return ()
    count = ggml_function("ggml_backend_reg_dev_count", ctypes.c_size_t, ctypes.c_void_p)
    get = ggml_function(
        "ggml_backend_reg_dev_get", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
    )
    return tuple(describe(int(get(reg, i))) for i in range(int(count(reg))))


def local_devices() -> tuple[Device, ...]:
    """This machine's devices as llama.cpp's rpc-server offers them: its GPUs, or its CPU
    where it has none."""
    ensure_backend()
    count = ggml_function("ggml_backend_dev_count", ctypes.c_size_t)
    get = ggml_function("ggml_backend_dev_get", ctypes.c_void_p, ctypes.c_size_t)
    kind = ggml_function("ggml_backend_dev_type", ctypes.c_int, ctypes.c_void_p)
    handles = [int(get(i)) for i in range(int(count()))]
    gpus = [h for h in handles if kind(h) in (_DEVICE_GPU, _DEVICE_IGPU)]
    chosen = gpus or [h for h in handles if kind(h) == _DEVICE_CPU][:1]
    return tuple(describe(h) for h in chosen)


def serve(endpoint: str, *, threads: int, cache: Path | None, devices: tuple[Device, ...]) -> None:
    """Serve `devices` at `endpoint` until the process ends (blocks; ggml prints what it
    serves). Returns only when the server could not start (ggml printed why)."""
    start = _START_SERVER(_proc("ggml_backend_rpc_start_server"))
    handles = (ctypes.c_void_p * len(devices))(*(d.handle for d in devices))
    cache_dir = str(cache).encode() if cache is not None else None
    start(endpoint.encode(), cache_dir, threads, len(devices), handles)


_abort_lock = threading.Lock()
_abort_function: Any = None


def abort_callback() -> Any:
    """A ggml_abort_callback that is true once a server was lost (rpc_relay.abort_flag).

    It is libc's strlen, called on the flag's two bytes: llama.cpp calls the abort callback
    between every two operations, and a Python callback would take the interpreter's lock
    each time."""
    global _abort_function
    import llama_cpp

    with _abort_lock:
        if _abort_function is None:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
            address = ctypes.cast(libc.strlen, ctypes.c_void_p).value or 0
            _abort_function = llama_cpp.ggml_abort_callback(address)
        return _abort_function
