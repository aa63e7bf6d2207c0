"""Loading a GGUF file into llama.cpp: the header check, the weights, a context, what it did."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp

from specchat.engine.llamacpp.backend import forget_log, gpu_backend_name, last_error_line
from specchat.engine.llamacpp.model_size import kv_bytes_per_token, sized_description
from specchat.engine.llamacpp.recurrent_state import HYBRID_NEAR_TIES

if TYPE_CHECKING:
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float], None]


class ModelLoadError(RuntimeError):
    """A model file could not be loaded; the message says why, for people."""


class LoadCancelled(ModelLoadError):
    """Loading was cancelled by the user."""


class RemoteLoadError(ModelLoadError):
    """An RPC server the target was to be spread over cannot be used (the message names it)."""


class ContextFullError(RuntimeError):
    """Evaluating more tokens would overflow the context window."""


class DecodeError(RuntimeError):
    """llama_decode reported a failure."""


def decode_failure(status: int) -> str:
    """Why llama_decode failed with `status`, for people: a lost RPC server by name."""
    from specchat.engine.llamacpp.rpc_relay import lost_message

    lost = lost_message()
    if lost:
        return (
            f"{lost}. The answer so far is kept; reload the pair, on this machine alone "
            "or once the server is back"
        )
    return f"llama_decode failed with status {status}"


@dataclass(frozen=True)
class LoadInfo:
    """What a load actually did.

    Attributes:
        path: the GGUF file.
        n_layers: transformer blocks in the model.
        gpu_layers: layers that went to the GPU (0 on a CPU build).
        backend: 'CPU', or the GPU backend name.
        n_ctx: context window of the created context.
        n_ctx_train: context length the model was trained for.
        n_vocab: vocabulary size.
        n_threads: decode threads.
        description: llama.cpp's one-line model description ("qwen2 1.5B Q4_K - Medium").
        kv_bytes_per_token: memory one context token costs in the KV cache (keys and values
            in every layer), 0 when the model does not say.
        key_type: how the cache stores keys: "Q8_0" on a CPU (see EXACT_KEY_TYPE), "F16"
            otherwise.
        state_bytes: what a recurrent or hybrid model's state copies take at most, besides
            the KV cache: llama.cpp's snapshots and SpecChat's checkpoints
            (recurrent_state.state_copies); 0 for an attention model.
        near_ties: why a speculative answer at T = 0 can part from plain at a near-tie on
            this model whatever its keys (a hybrid: recurrent_state.HYBRID_NEAR_TIES), for
            the window's exactness note and the API's `specchat` object; "" otherwise.
        remote: the RPC servers its layers are spread over and how (RemoteTarget.key), ""
            when it runs on this machine alone.
    """

    path: Path
    n_layers: int
    gpu_layers: int
    backend: str
    n_ctx: int
    n_ctx_train: int
    n_vocab: int
    n_threads: int
    description: str
    kv_bytes_per_token: int = 0
    key_type: str = "F16"
    state_bytes: int = 0
    near_ties: str = ""
    remote: str = ""


#: How a CPU context stores keys. llama.cpp's CPU attention for ONE token over 512 or more
#: F16 keys splits the keys across threads and merges partial sums, while a batch's rows run
#: the keys in one pass: the same position then comes out of a verify pass a little
#: differently than decoded alone, and greedy speculative output can part from plain at a
#: near-tie. With Q8_0 keys both take the one-pass path, so with a format whose matrix
#: kernels agree too (Q4_0) a batched row is bit-identical to a single one at any length, at
#: the same speed and half the key memory (docs/formats.md has the measurements).
EXACT_KEY_TYPE = llama_cpp.GGML_TYPE_Q8_0

#: What llama.cpp reads as "every layer" when more layers are asked for than a model has.
_ALL_LAYERS = 999


def check_file(path: Path) -> None:
    """Raise ModelLoadError unless `path` is a file whose GGUF header SpecChat's reader accepts.

    llama.cpp's own parser has had overflows on crafted files, and aborts the process on
    some malformed ones: the header is checked with SpecChat's bounded reader first.
    """
    from specchat.models.gguf_format import GGUFError
    from specchat.models.gguf_reader import validate

    if path.is_dir():
        raise ModelLoadError(f"{path} is a folder, not a model file")
    if not path.is_file():
        raise ModelLoadError(f"model file not found: {path}")
    try:
        validate(path)
    except GGUFError as error:
        raise ModelLoadError(f"{path.name} is not a usable GGUF file: {error}") from None


def load_weights(
    path: Path,
    *,
    n_gpu_layers: int,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    load_mtp: bool = False,
    remote: RemoteTarget | None = None,
) -> llama_cpp.llama_model_p:
    """The model's weights, `n_gpu_layers` of them offloaded (-1: all); `cancel` stops it.
    `load_mtp` loads a file's MTP (nextn) layers too, which llama.cpp skips by default.
    `remote` places the layers over other machines instead (rpc_placement; a server that
    cannot be used raises RemoteLoadError, naming it)."""
    params = llama_cpp.llama_model_default_params()
    params.load_mtp = load_mtp
    params.n_gpu_layers = n_gpu_layers if n_gpu_layers >= 0 else _ALL_LAYERS
    from specchat.engine.llamacpp.rpc_relay import clear_lost

    clear_lost()  # a server lost before is no reason for this load's failures
    if remote is not None:
        from specchat.engine.llamacpp.rpc_devices import RpcUnavailable
        from specchat.engine.llamacpp.rpc_placement import place
        from specchat.engine.llamacpp.rpc_wire import RpcServerError

        try:
            placement = place(remote, path)  # held until the load is done: it owns the arrays
        except (RpcServerError, RpcUnavailable) as error:
            raise RemoteLoadError(str(error)) from None
        placement.apply(params)
        log.info("%s placed: %s", path.name, placement.describe())
    # Held in a local so the ctypes callback outlives the load that calls it.
    callback = _progress_callback(progress, cancel)
    params.progress_callback = callback
    forget_log()
    model: llama_cpp.llama_model_p = llama_cpp.llama_model_load_from_file(
        str(path).encode(), params
    )
    if not model:
        if cancel is not None and cancel.is_set():
            raise LoadCancelled(f"loading {path.name} was cancelled")
        reason = last_error_line() or "llama.cpp could not read it"
        raise ModelLoadError(f"could not load {path.name}: {reason}")
    return model


def _progress_callback(
    progress: ProgressCallback | None, cancel: threading.Event | None
) -> Any:  # a ctypes CFUNCTYPE instance
    def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
        if progress is not None:
            try:
                progress(float(fraction))
            except Exception:  # a failing observer must not abort the load
                log.exception("load progress callback failed")
        return not (cancel is not None and cancel.is_set())

    return llama_cpp.llama_progress_callback(on_progress)


def is_recurrent(model: llama_cpp.llama_model_p) -> bool:
    """Whether the model keeps one state per sequence (Mamba, RWKV, hybrids such as Jamba)
    instead of one cache entry per token."""
    return bool(llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model))


def offloaded_layers(model: llama_cpp.llama_model_p, n_gpu_layers: int) -> tuple[int, str]:
    """How many layers a load asking for `n_gpu_layers` (-1: all) put on the GPU, and the
    backend that runs them ("CPU" when none did)."""
    backend = gpu_backend_name()
    if backend is None:
        return 0, "CPU"
    asked = n_gpu_layers if n_gpu_layers >= 0 else _ALL_LAYERS
    layers = min(asked, int(llama_cpp.llama_model_n_layer(model)) + 1)
    return layers, backend if layers else "CPU"


def create_context(
    model: llama_cpp.llama_model_p,
    *,
    name: str,
    n_ctx: int,
    n_batch: int,
    n_threads: int,
    n_seq_max: int,
    exact_keys: bool,
    n_rs_seq: int = 0,
    abort_on_lost_server: bool = False,
) -> tuple[llama_cpp.llama_context_p, str]:
    """A context over `model` and the type its keys are stored as ("Q8_0" or "F16").

    `n_seq_max` sequences share one unified cache (every sequence sees the same cells), so
    the drafts of one tree pass all read the cached text's cells. `exact_keys` asks for
    EXACT_KEY_TYPE keys; a model whose head size Q8_0 blocks do not divide (some tiny ones)
    gets llama.cpp's default, F16. Raises ModelLoadError, naming `name`, when no context can
    be made. `n_rs_seq` asks a recurrent model for that many state snapshots (llama.cpp
    grants them only where the architecture supports them: see recurrent_state).
    `abort_on_lost_server` fails a pass during which an RPC server was lost (rpc_relay).
    """
    params = llama_cpp.llama_context_default_params()
    if abort_on_lost_server:
        from specchat.engine.llamacpp.rpc_devices import abort_callback
        from specchat.engine.llamacpp.rpc_relay import abort_flag

        params.abort_callback = abort_callback()
        params.abort_callback_data = ctypes.cast(abort_flag, ctypes.c_void_p)
    params.n_rs_seq = n_rs_seq
    params.n_ctx = n_ctx
    params.n_batch = n_batch
    params.n_ubatch = n_batch
    params.n_seq_max = n_seq_max
    params.kv_unified = True
    params.n_threads = n_threads
    params.n_threads_batch = n_threads
    params.no_perf = True
    if exact_keys:
        params.type_k = EXACT_KEY_TYPE
        ctx = llama_cpp.llama_init_from_model(model, params)
        if ctx:
            return ctx, "Q8_0"
    params.type_k = llama_cpp.GGML_TYPE_F16
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        reason = last_error_line() or "not enough memory for the context?"
        raise ModelLoadError(f"could not create a context for {name}: {reason}")
    return ctx, "F16"


def read_metadata(model: llama_cpp.llama_model_p, key: str) -> str | None:
    """The GGUF metadata value stored under `key`, as text; None when the file has none."""
    buffer = ctypes.create_string_buffer(1 << 16)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buffer, len(buffer))
    if n < 0:
        return None
    if n >= len(buffer):
        buffer = ctypes.create_string_buffer(n + 1)
        llama_cpp.llama_model_meta_val_str(model, key.encode(), buffer, len(buffer))
    return buffer.value.decode("utf-8", errors="replace")


def load_info(
    model: llama_cpp.llama_model_p,
    ctx: llama_cpp.llama_context_p,
    *,
    path: Path,
    gpu_layers: int,
    backend: str,
    n_threads: int,
    key_type: str,
    remote: str = "",
) -> LoadInfo:
    """What loading `path` did, read back from the model and its context."""
    n_layers = int(llama_cpp.llama_model_n_layer(model))
    desc = ctypes.create_string_buffer(256)
    llama_cpp.llama_model_desc(model, desc, ctypes.sizeof(desc))
    kv = kv_bytes_per_token(
        n_layer=n_layers,
        n_head=int(llama_cpp.llama_model_n_head(model)),
        n_head_kv=int(llama_cpp.llama_model_n_head_kv(model)),
        n_embd=int(llama_cpp.llama_model_n_embd(model)),
        key_type=key_type,
    )
    state = 0
    if is_recurrent(model):
        kv, state = recurrent_memory(ctx, path, key_type=key_type, kv=kv)
    return LoadInfo(
        path=path,
        n_layers=n_layers,
        gpu_layers=gpu_layers,
        backend=backend,
        n_ctx=int(llama_cpp.llama_n_ctx(ctx)),
        n_ctx_train=int(llama_cpp.llama_model_n_ctx_train(model)),
        n_vocab=int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))),
        n_threads=n_threads,
        description=sized_description(
            desc.value.decode("utf-8", errors="replace"),
            size_label=read_metadata(model, "general.size_label") or "",
            n_params=int(llama_cpp.llama_model_n_params(model)),
        ),
        kv_bytes_per_token=kv,
        key_type=key_type,
        remote=remote,
        state_bytes=state,
        near_ties=HYBRID_NEAR_TIES if is_recurrent(model) else "",
    )


def recurrent_memory(ctx: Any, path: Path, *, key_type: str, kv: int) -> tuple[int, int]:
    """A recurrent or hybrid model's KV bytes per token (its attention layers only) and the
    bytes its state copies take at most, from its metadata (`kv` and 0 where it cannot be
    read: llama.cpp sizes a state only once it holds tokens)."""
    from specchat.engine.llamacpp.recurrent_state import state_copies
    from specchat.models.context_memory import MEMORY_KEYS, context_memory
    from specchat.models.gguf_format import GGUFError
    from specchat.models.gguf_reader import read_metadata as read_gguf

    copy = 0
    with contextlib.suppress(GGUFError, OSError):
        arch = read_gguf(path, keys={"general.architecture"}, arrays=False).architecture
        keys = {"general.architecture", *(f"{arch}.{key}" for key in MEMORY_KEYS)}
        values = read_gguf(path, keys=keys).values
        memory = context_memory(values, key_type=key_type)
        kv, copy = memory.kv_bytes_per_token, memory.state_bytes
    return kv, state_copies(int(llama_cpp.llama_n_rs_seq(ctx)), copy) * copy
