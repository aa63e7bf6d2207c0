"""CPU-fast copies of a target GGUF (Q4_0), made by llama.cpp's quantizer in a child process."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from specchat import paths
from specchat.models.gguf_format import GGUFError
from specchat.models.gguf_reader import GGUFInfo, validate
from specchat.models.transfer import (
    DISK_MARGIN,
    FreeSpace,
    ProgressCallback,
    ProgressMeter,
    default_free_space,
    format_bytes,
)

#: llama.h's `LLAMA_FTYPE_MOSTLY_Q4_0`: the format whose batched rows match single-token rows
#: on llama.cpp's CPU kernels (repacked groups), and which verifies 4 tokens for the price of 2.
FTYPE_Q4_0 = 2
#: What the derived file is called after: "<source stem>.derived-q4_0.gguf".
DERIVED_TAG = "derived-q4_0"
#: ggml type numbers and their (block size, bytes per block), for the size estimate.
_Q4_0, _Q8_0, _Q6_K = 2, 8, 14
_BLOCKS = {_Q4_0: (32, 18), _Q8_0: (32, 34), _Q6_K: (256, 210)}
#: general.file_type values of unquantised weights (F32, F16, BF16): converting those is
#: not a re-quantisation.
FULL_WEIGHT_FTYPES = frozenset({0, 1, 32})
#: Seconds between looks at the child and the growing file.
POLL_S = 0.1
#: Bytes the quantizer's header grows by (it adds general.quantization_version).
_HEADER_SLACK = 64


class OptimiseError(Exception):
    """A conversion that could not be made; the message is for the user."""


class OptimiseCancelled(OptimiseError):
    """The user cancelled; nothing is left on disk."""


class NotEnoughDisk(OptimiseError):
    """The disk cannot hold the converted file."""


@dataclass(frozen=True)
class Optimised:
    """A finished conversion.

    Attributes:
        source: the file converted.
        path: the derived file.
        size: its bytes.
        estimated: what the estimate before starting said (progress and the disk check use it).
        seconds: wall time of the conversion (the child's start and the load check included).
        requantised: True when the source was already quantised (double quantisation).
    """

    source: Path
    path: Path
    size: int
    estimated: int
    seconds: float
    requantised: bool


def derived_path(source: Path, *, models_dir: Path | None = None) -> Path:
    """Where the CPU-fast copy of `source` lives: beside the models, named after its source."""
    folder = paths.models_dir() if models_dir is None else models_dir
    return folder / f"{Path(source).stem}.{DERIVED_TAG}.gguf"


def quality_path(derived: Path) -> Path:
    """The quality measurement stored beside a derived file."""
    return derived.with_name(derived.name.removesuffix(".gguf") + ".quality.json")


def _check_input(source: Path) -> GGUFInfo:
    if not source.is_file():
        raise OptimiseError(f"model file not found: {source}")
    try:
        return validate(source)
    except GGUFError as error:
        raise OptimiseError(f"{source.name} is not a usable GGUF file: {error}") from None


def _output_tensor(info: GGUFInfo) -> str:
    names = {tensor.name for tensor in info.tensors}
    # A model with tied embeddings multiplies by token_embd at the output.
    return "output.weight" if "output.weight" in names else "token_embd.weight"


def estimate_size(info: GGUFInfo) -> int:
    """Bytes of the Q4_0 file llama.cpp's quantizer writes for this model.

    Follows llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_0 without an importance matrix:
    2-D weights become Q4_0, the output matrix Q6_K (Q8_0 when its rows do not fill 256-wide
    blocks), everything else is copied. Raises OptimiseError when a row cannot be Q4_0.
    """
    alignment = info.metadata.alignment
    output = _output_tensor(info)
    total = 0
    for tensor in info.tensors:
        nbytes = tensor.nbytes
        quantised = (
            tensor.name.endswith("weight")
            and len(tensor.shape) >= 2
            and "ffn_gate_inp" not in tensor.name  # MoE routers stay as they are
        )
        if quantised:
            row = tensor.shape[0]
            elements = 1
            for dim in tensor.shape:
                elements *= dim
            kind = _Q4_0
            if tensor.name == output:
                kind = _Q6_K if row % 256 == 0 else _Q8_0
            block, size = _BLOCKS[kind]
            if row % block:
                raise OptimiseError(
                    f"tensor {tensor.name!r} has rows of {row} values, not a multiple of "
                    f"{block}: this model cannot be stored as Q4_0"
                )
            if tensor.ggml_type != kind:
                nbytes = elements // block * size
        total += -(-nbytes // alignment) * alignment
    header = -(-(info.data_offset + _HEADER_SLACK) // alignment) * alignment
    return header + total


def check_disk(needed: int, folder: Path, *, free_space: FreeSpace | None = None) -> None:
    """Raise NotEnoughDisk unless `folder` has room for `needed` bytes and a margin."""
    free = (free_space or default_free_space)(folder)
    if free < needed + DISK_MARGIN:
        raise NotEnoughDisk(
            f"not enough disk space for the CPU-fast copy: it needs about "
            f"{format_bytes(needed + DISK_MARGIN)} (with a safety margin), "
            f"{format_bytes(free)} are free in {folder}"
        )


def _child(source: str, output: str, ftype: int, threads: int, conn: Connection) -> None:
    """Runs in the child process: quantize, then prove llama.cpp loads the result."""
    import ctypes
    from collections import deque

    import llama_cpp

    from specchat import ggml_backends

    # Ctrl-C reaches the whole process group; the parent decides what a cancel does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lines: deque[str] = deque(maxlen=60)

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
    def on_log(_level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        with contextlib.suppress(Exception):
            lines.append(text.decode("utf-8", errors="replace").rstrip())

    def reason() -> str:
        for line in reversed(lines):
            lowered = line.lower()
            if "failed" in lowered or "error" in lowered or "unsupported" in lowered:
                return line.split(": ", 1)[-1].strip()
        return "llama.cpp gave no reason"

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
    ggml_backends.load()  # a portable build has no CPU kernels until they are loaded
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True  # the shipped targets are Q4_K_M already
    params.nthread = threads
    status = llama_cpp.llama_model_quantize(source.encode(), output.encode(), ctypes.byref(params))
    if status != 0:
        why = reason()
        if "iostream" in why or "write" in why:
            # std::ofstream reports a full disk or a file-size limit as a bare stream error.
            why = f"writing the converted file failed; is the disk full? ({why})"
        conn.send(("error", f"llama.cpp could not convert it: {why}"))
        return
    conn.send(("converted", ""))
    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(output.encode(), model_params)
    if not model:
        conn.send(("error", f"llama.cpp cannot load the converted file: {reason()}"))
        return
    llama_cpp.llama_model_free(model)
    conn.send(("ok", ""))


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def optimise(
    source: Path,
    *,
    output: Path | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free_space: FreeSpace | None = None,
    threads: int = 0,
) -> Optimised:
    """Convert `source` into a Q4_0 file at `output` (default: derived_path(source)).

    The quantizer runs in a child process: its C call has no progress callback and cannot be
    interrupted, so progress is the output file's growth against estimate_size, and a cancel
    (or Ctrl-C) kills the child and removes the partial file. The result is written under a
    temporary name and renamed only after llama.cpp has loaded it and its header checks out.

    Reports DownloadProgress with stage "convert" (bytes written) then "check".
    """
    source = Path(source)
    output = derived_path(source) if output is None else Path(output)
    info = _check_input(source)
    file_type = info.metadata.get("general.file_type")
    if file_type == FTYPE_Q4_0:
        raise OptimiseError(f"{source.name} is already Q4_0; there is nothing to convert")
    expected = estimate_size(info)
    output.parent.mkdir(parents=True, exist_ok=True)
    check_disk(expected, output.parent, free_space=free_space)
    partial = output.with_name(output.name + ".partial")
    _remove(partial)  # left by a crash: it can never be resumed
    began = time.monotonic()
    context = multiprocessing.get_context("spawn")  # never fork a process holding threads
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(
        target=_child,
        args=(str(source), str(partial), FTYPE_Q4_0, threads, writer),
        name="specchat-optimise",
        daemon=True,
    )
    meter = ProgressMeter(progress, label=output.name, stage="convert", total=expected)
    check: ProgressMeter | None = None
    outcome: tuple[str, str] | None = None
    try:
        _start_deaf_to_ctrl_c(child)
        writer.close()  # the child holds the only writer: EOF means it is gone
        meter.set(0)
        while outcome is None:
            if cancel is not None and cancel.is_set():
                raise OptimiseCancelled("conversion cancelled")
            if reader.poll(POLL_S):
                try:
                    kind, text = reader.recv()
                except EOFError:
                    child.join(5)
                    code = child.exitcode
                    raise OptimiseError(
                        f"the converter stopped unexpectedly ({_describe_exit(code)})"
                    ) from None
                if kind == "converted":
                    size = partial.stat().st_size
                    meter.total = size
                    meter.set(size)
                    meter.finish()
                    # The load check reads the whole file once: its bar is the file's size.
                    check = ProgressMeter(progress, label=output.name, stage="check", total=size)
                    check.set(0)
                elif kind in ("ok", "error"):
                    outcome = (kind, text)
                continue
            if check is None:
                with contextlib.suppress(FileNotFoundError):
                    # The header is rewritten last: hold the bar below 100 % until then.
                    meter.set(min(partial.stat().st_size, expected * 99 // 100))
        child.join(10)
        if outcome[0] == "error":
            raise OptimiseError(f"{source.name}: {outcome[1]}")
        try:
            validate(partial)
        except GGUFError as error:
            raise OptimiseError(f"the converted file does not check out: {error}") from None
        os.replace(partial, output)
    except BaseException:
        if child.is_alive():
            child.kill()
        with contextlib.suppress(ValueError, AssertionError):
            child.join(10)
        _remove(partial)
        raise
    finally:
        reader.close()
        with contextlib.suppress(OSError):
            writer.close()
    if check is not None:
        check.set(check.total or 0)
        check.finish()
    return Optimised(
        source=source,
        path=output,
        size=output.stat().st_size,
        estimated=expected,
        seconds=time.monotonic() - began,
        requantised=file_type not in FULL_WEIGHT_FTYPES,
    )


def _start_deaf_to_ctrl_c(child: multiprocessing.process.BaseProcess) -> None:
    """Start `child` deaf to SIGINT from its first instruction, losing no Ctrl-C meant for us.

    Ctrl-C in a terminal reaches the whole process group; a child still starting Python would
    print a KeyboardInterrupt traceback. SIGINT is blocked for the moment of the spawn: the
    child inherits the blocked mask across fork and exec (and ignores SIGINT once it runs),
    while a Ctrl-C that comes meanwhile stays pending here and is raised as soon as the spawn
    is over (ignoring it instead would drop it: the conversion would run on). Only the main
    thread receives signals; a worker thread's child is never sent Ctrl-C.
    """
    if threading.current_thread() is not threading.main_thread():
        child.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        child.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "it did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if -code == signal.SIGXFSZ:
            return f"{name}: the file grew past the size this system allows"
        return f"killed by {name}"
    return f"exit status {code}"
