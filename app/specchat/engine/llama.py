"""Thin wrapper over llama.cpp's low-level API: load, batched decode, KV rollback, tokens."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from specchat.engine.ctrl_c import ctrl_c_held
from specchat.engine.model_size import kv_bytes_per_token, sized_description

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float], None]


class ModelLoadError(RuntimeError):
    """A model file could not be loaded; the message says why, for people."""


class LoadCancelled(ModelLoadError):
    """Loading was cancelled by the user."""


class ContextFullError(RuntimeError):
    """Evaluating more tokens would overflow the context window."""


class DecodeError(RuntimeError):
    """llama_decode reported a failure."""


# --- process-wide llama.cpp set-up ------------------------------------------------------------
_init_lock = threading.Lock()
_initialised = False
#: The last lines llama.cpp logged, to explain a failed load ("unknown pre-tokenizer ...").
_recent_log: deque[str] = deque(maxlen=40)
#: ggml's log level for errors (enum ggml_log_level: NONE, DEBUG, INFO, WARN, ERROR, CONT).
_GGML_LOG_LEVEL_ERROR = 4


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
def _on_llama_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # An exception raised here would be printed by ctypes for every log line: never raise.
    try:
        line = text.decode("utf-8", errors="replace").rstrip()
        if line:
            _recent_log.append(line)
        if level == _GGML_LOG_LEVEL_ERROR:
            log.debug("llama.cpp: %s", line)
    except Exception:
        pass


def _ensure_backend() -> None:
    global _initialised
    with _init_lock:
        if not _initialised:
            llama_cpp.llama_backend_init()
            # Route llama.cpp's chatter away from the terminal; keep it to explain errors.
            llama_cpp.llama_log_set(_on_llama_log, ctypes.c_void_p(0))
            _initialised = True


def _last_error_line() -> str:
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
    _ensure_backend()
    info: bytes = llama_cpp.llama_print_system_info()
    return info.decode("utf-8", errors="replace")


def gpu_backend_name() -> str | None:
    """'CUDA', 'Metal', 'Vulkan'... when this llama.cpp build can offload, else None."""
    _ensure_backend()
    if not llama_cpp.llama_supports_gpu_offload():
        return None
    info = system_info()
    for name in ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL"):
        if name.upper() in info.upper():
            return name
    return "GPU"


def default_threads() -> int:
    """Physical cores are what llama.cpp scales with; hyper-threads only add contention."""
    count = os.cpu_count() or 2
    return max(1, count // 2) if count > 4 else count


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


#: Most drafts one tree pass checks (sequences per context).
MAX_BRANCHES = 4

#: How a CPU context stores keys. llama.cpp's CPU attention for ONE token over 512 or more
#: F16 keys splits the keys across threads and merges partial sums, while a batch's rows run
#: the keys in one pass: the same position then comes out of a verify pass a little
#: differently than decoded alone (≈ 0.3 logits on a 1.5B model), and greedy speculative
#: output can part from plain at a near-tie. With Q8_0 keys both take the one-pass path, so
#: with a format whose matrix kernels agree too (Q4_0) a batched row is bit-identical to a
#: single one at any length, at the same speed and half the key memory (docs/formats.md).
EXACT_KEY_TYPE = llama_cpp.GGML_TYPE_Q8_0


class LlamaModel:
    """One GGUF model with one context and one sequence, tracking what its KV cache holds.

    Attributes:
        info: what loading did.
        tokens: the tokens whose keys and values are in the cache, in order.
        n_vocab: vocabulary size (rows of logits).
        n_ctx: context window.
        can_rollback: whether the cache can drop its last tokens alone. Recurrent and hybrid
            models (Mamba, RWKV, Jamba...) keep one state per sequence instead of one entry
            per token: rolling them back means evaluating the kept tokens again.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        n_batch: int = 512,
        exact_keys: bool = True,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """Load `path`; `exact_keys=False` keeps a CPU context's keys in F16 (llama.cpp's
        default) instead of EXACT_KEY_TYPE."""
        _ensure_backend()
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelLoadError(f"model file not found: {self.path}")
        # llama.cpp's own parser has had overflows on crafted files, and aborts the process
        # on some malformed ones: check the header with SpecChat's bounded reader first.
        from specchat.models.gguf_format import GGUFError
        from specchat.models.gguf_reader import validate

        try:
            validate(self.path)
        except GGUFError as error:
            raise ModelLoadError(f"{self.path.name} is not a usable GGUF file: {error}") from None
        self._model: llama_cpp.llama_model_p | None = None
        self._ctx: llama_cpp.llama_context_p | None = None
        self._batch: llama_cpp.llama_batch | None = None
        self.tokens: list[int] = []
        # The last decode_tree: where it began and its paths, for keep_path.
        self._tree: tuple[int, list[list[int]]] = (0, [])

        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers if n_gpu_layers >= 0 else 999
        # Keep the callback object alive for the duration of the load.
        progress_cb = self._make_progress_callback(progress, cancel)
        params.progress_callback = progress_cb
        # llama.cpp calls back into Python while it loads (its log, the progress callback):
        # Ctrl-C there is held and raised once it returns (see ctrl_c_held).
        with ctrl_c_held(self.close):
            _recent_log.clear()
            model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
            if not model:
                if cancel is not None and cancel.is_set():
                    raise LoadCancelled(f"loading {self.path.name} was cancelled")
                reason = _last_error_line() or "llama.cpp could not read it"
                raise ModelLoadError(f"could not load {self.path.name}: {reason}")
            self._model = model
            self._vocab = llama_cpp.llama_model_get_vocab(model)
            self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
            n_layers = int(llama_cpp.llama_model_n_layer(model))
            n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))

            threads = n_threads or default_threads()
            cparams = llama_cpp.llama_context_default_params()
            cparams.n_ctx = n_ctx
            cparams.n_batch = n_batch
            cparams.n_ubatch = n_batch
            # Tree verification checks several drafts in one pass, one sequence each, sharing
            # the cached text's cells (a unified cache: every sequence sees the same cells). A
            # recurrent model would hold a whole state per sequence, and never drafts anyway.
            recurrent = bool(
                llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)
            )
            self.max_branches = 1 if recurrent else MAX_BRANCHES
            cparams.n_seq_max = self.max_branches
            cparams.kv_unified = True
            cparams.n_threads = threads
            cparams.n_threads_batch = threads
            cparams.no_perf = True
            backend = gpu_backend_name()
            gpu_layers = min(params.n_gpu_layers, n_layers + 1) if backend else 0
            ctx = None
            if exact_keys and not gpu_layers:
                cparams.type_k = EXACT_KEY_TYPE
                ctx = llama_cpp.llama_init_from_model(model, cparams)
            key_type = "Q8_0" if ctx else "F16"
            if not ctx:
                # A head size Q8_0 blocks do not divide (some tiny models): llama.cpp's default.
                cparams.type_k = llama_cpp.GGML_TYPE_F16
                ctx = llama_cpp.llama_init_from_model(model, cparams)
            if not ctx:
                self.close()
                reason = _last_error_line() or "not enough memory for the context?"
                raise ModelLoadError(f"could not create a context for {self.path.name}: {reason}")
            self._ctx = ctx
        self._memory = llama_cpp.llama_get_memory(ctx)
        self.can_rollback = not (
            llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)
        )
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        # llama.cpp clamps the batch to the context and ABORTS on a larger decode: read back
        # the sizes it really uses and never hand it more in one call.
        self.n_batch = min(
            int(llama_cpp.llama_n_batch(ctx)), int(llama_cpp.llama_n_ubatch(ctx)), self.n_ctx
        )
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, self.max_branches)
        self._pieces: dict[int, bytes] = {}
        #: Tokens that end a turn besides the vocabulary's own end-of-generation set.
        self.end_of_turn: frozenset[int] = frozenset()

        desc = ctypes.create_string_buffer(256)
        llama_cpp.llama_model_desc(model, desc, ctypes.sizeof(desc))
        self.info = LoadInfo(
            path=self.path,
            n_layers=n_layers,
            gpu_layers=gpu_layers,
            backend=backend if backend and gpu_layers else "CPU",
            n_ctx=self.n_ctx,
            n_ctx_train=n_ctx_train,
            n_vocab=self.n_vocab,
            n_threads=threads,
            description=sized_description(
                desc.value.decode("utf-8", errors="replace"),
                size_label=self.metadata("general.size_label") or "",
                n_params=int(llama_cpp.llama_model_n_params(model)),
            ),
            kv_bytes_per_token=kv_bytes_per_token(
                n_layer=n_layers,
                n_head=int(llama_cpp.llama_model_n_head(model)),
                n_head_kv=int(llama_cpp.llama_model_n_head_kv(model)),
                n_embd=int(llama_cpp.llama_model_n_embd(model)),
                key_type=key_type,
            ),
            key_type=key_type,
        )

    @staticmethod
    def _make_progress_callback(
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

    # --- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            llama_cpp.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            llama_cpp.llama_model_free(self._model)
            self._model = None

    @property
    def closed(self) -> bool:
        """Whether close() has freed the weights and the context."""
        return self._model is None

    def __enter__(self) -> LlamaModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # At interpreter shutdown the llama_cpp module may already be gone.
        with contextlib.suppress(Exception):
            self.close()

    # --- vocabulary --------------------------------------------------------------------------
    def tokenize(
        self, text: str, *, add_special: bool = False, parse_special: bool = True
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        buffer = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(
            self._vocab, data, len(data), buffer, capacity, add_special, parse_special
        )
        if n < 0:
            capacity = -n
            buffer = (llama_cpp.llama_token * capacity)()
            n = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buffer, capacity, add_special, parse_special
            )
        return list(buffer[:n])

    def piece(self, token: int) -> bytes:
        """The bytes one token stands for; control tokens render as nothing."""
        cached = self._pieces.get(token)
        if cached is not None:
            return cached
        buffer = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, 64, 0, False)
        if n < 0:
            buffer = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, -n, 0, False)
        piece = buffer.raw[:n]
        self._pieces[token] = piece
        return piece

    def token_text(self, token: int) -> str:
        """The vocabulary's own spelling of a token (special tokens included)."""
        raw = llama_cpp.llama_vocab_get_text(self._vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def is_eog(self, token: int) -> bool:
        return token in self.end_of_turn or bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def hide_tokens(self, tokens: Sequence[int]) -> None:
        """Render these tokens as nothing: a chat format's markers are never answer text."""
        for token in tokens:
            self._pieces[token] = b""

    def single_token(self, text: str) -> int | None:
        """The token id if `text` is exactly one token of the vocabulary (specials parsed)."""
        tokens = self.tokenize(text, add_special=False, parse_special=True)
        return tokens[0] if len(tokens) == 1 else None

    @property
    def eos(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self._vocab))

    @property
    def bos(self) -> int:
        return int(llama_cpp.llama_vocab_bos(self._vocab))

    @property
    def add_bos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))

    def metadata(self, key: str) -> str | None:
        buffer = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buffer, len(buffer))
        if n < 0:
            return None
        if n >= len(buffer):
            buffer = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buffer, len(buffer))
        return buffer.value.decode("utf-8", errors="replace")

    def chat_template(self) -> str | None:
        return self.metadata("tokenizer.chat_template")

    # --- decoding ----------------------------------------------------------------------------
    @property
    def context(self) -> Any:
        """The llama.cpp context (for engine.kv_store's state save and load)."""
        return self._ctx

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def room(self) -> int:
        """How many more tokens fit in the context."""
        return self.n_ctx - len(self.tokens)

    def truncate(self, n_keep: int) -> None:
        """Drop every cached token from position n_keep on (KV rollback)."""
        if n_keep >= len(self.tokens):
            return
        if llama_cpp.llama_memory_seq_rm(self._memory, 0, n_keep, -1):
            del self.tokens[n_keep:]
            return
        # A recurrent state cannot drop its last tokens: evaluate the kept ones again, so the
        # cache still holds exactly `tokens[:n_keep]` (slow, but never wrong).
        kept = self.tokens[:n_keep]
        self.reset()
        if kept:
            self.decode(kept, logits="none")

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(self._memory, True)
        self.tokens.clear()

    def decode(self, tokens: Sequence[int], *, logits: str = "last") -> np.ndarray:
        """Append `tokens` to the cache and return logits.

        Args:
            tokens: tokens to evaluate after the cached ones.
            logits: 'last' for the final row only, 'all' for one row per token, 'none'.

        Returns:
            An array of shape (rows, n_vocab) (rows = 0 for 'none'), copied out of llama.cpp.
        """
        if not tokens:
            raise ValueError("nothing to decode")
        if len(self.tokens) + len(tokens) > self.n_ctx:
            raise ContextFullError(
                f"{len(self.tokens)} + {len(tokens)} tokens exceed the context of {self.n_ctx}"
            )
        start = 0
        rows: list[np.ndarray] = []
        while start < len(tokens):
            chunk = tokens[start : start + self.n_batch]
            last_chunk = start + len(chunk) == len(tokens)
            if logits == "all":
                want = [True] * len(chunk)
            elif logits == "last" and last_chunk:
                want = [False] * (len(chunk) - 1) + [True]
            else:
                want = [False] * len(chunk)
            self._decode_chunk(chunk, want)
            n_out = sum(want)
            if n_out:
                pointer = llama_cpp.llama_get_logits(self._ctx)
                block = np.ctypeslib.as_array(pointer, shape=(n_out, self.n_vocab))
                rows.append(block.copy())
            start += len(chunk)
        if not rows:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        return rows[0] if len(rows) == 1 else np.concatenate(rows)

    def _decode_chunk(self, chunk: Sequence[int], want_logits: Sequence[bool]) -> None:
        batch = self._batch
        assert batch is not None
        base = len(self.tokens)
        batch.n_tokens = len(chunk)
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = base + i  # type: ignore[call-overload]
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = want_logits[i]
        status = llama_cpp.llama_decode(self._ctx, batch)
        if status != 0:
            # The cache may hold part of the batch now; drop it so `tokens` stays true (a
            # recurrent state cannot drop part of itself: it is cleared, and `tokens` with it).
            if not llama_cpp.llama_memory_seq_rm(self._memory, 0, base, -1):
                self.reset()
            raise DecodeError(f"llama_decode failed with status {status}")
        self.tokens.extend(chunk)

    def decode_tree(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Evaluate several continuations of the cached text in one pass.

        Their common prefixes are evaluated once: each distinct (prefix, token) is one row of
        the batch, tagged with the sequence of every path through it, so a path's tokens see
        the cached text, its own earlier tokens and nothing else. Afterwards path b occupies
        sequence b; `keep_path` keeps one and drops the others.

        Returns, per path, its logits: row i is the distribution after its first i + 1 tokens.
        """
        if not 1 <= len(paths) <= self.max_branches or not all(paths):
            raise ValueError(f"need 1 to {self.max_branches} non-empty paths")
        base = len(self.tokens)
        nodes: dict[tuple[int, ...], int] = {}
        rows: list[list[int]] = []
        seqs: list[list[int]] = []
        tokens: list[int] = []
        for seq, path in enumerate(paths):
            row: list[int] = []
            for depth in range(len(path)):
                key = tuple(path[: depth + 1])
                if key not in nodes:
                    nodes[key] = len(tokens)
                    tokens.append(path[depth])
                    seqs.append([])
                seqs[nodes[key]].append(seq)
                row.append(nodes[key])
            rows.append(row)
        depth_of = [len(key) - 1 for key in nodes]
        if base + max(map(len, paths)) > self.n_ctx or len(tokens) > self.n_batch:
            raise ContextFullError(f"a tree of {len(tokens)} tokens does not fit")
        for seq in range(1, len(paths)):
            llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)
            llama_cpp.llama_memory_seq_cp(self._memory, 0, seq, -1, -1)
        batch = self._batch
        assert batch is not None
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = base + depth_of[i]  # type: ignore[call-overload]
            # llama.cpp masks a row by its first sequence; every sequence of a row runs
            # through all of the row's ancestors, so any of them sees exactly its path.
            batch.n_seq_id[i] = len(seqs[i])
            for j, seq in enumerate(seqs[i]):
                batch.seq_id[i][j] = seq
            batch.logits[i] = True
        status = llama_cpp.llama_decode(self._ctx, batch)
        if status != 0:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, base, -1)
            self._drop_branches(len(paths))
            raise DecodeError(f"llama_decode failed with status {status}")
        pointer = llama_cpp.llama_get_logits(self._ctx)
        block = np.ctypeslib.as_array(pointer, shape=(len(tokens), self.n_vocab)).copy()
        self._tree = (base, [list(p) for p in paths])
        return [block[row] for row in rows]

    def keep_path(self, path: int, n_keep: int) -> None:
        """After `decode_tree`: keep the first n_keep tokens of one path as the cached text's
        continuation (sequence 0) and drop everything else the tree added."""
        base, paths = self._tree
        kept = paths[path][:n_keep]
        if path != 0:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, base, -1)
            llama_cpp.llama_memory_seq_cp(self._memory, path, 0, base, base + len(kept))
        self._drop_branches(len(paths))
        llama_cpp.llama_memory_seq_rm(self._memory, 0, base + len(kept), -1)
        self.tokens.extend(kept)

    def _drop_branches(self, n_paths: int) -> None:
        for seq in range(1, n_paths):
            llama_cpp.llama_memory_seq_rm(self._memory, seq, -1, -1)

    def cached_prefix(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` the cache already holds."""
        cached = self.tokens
        limit = min(len(cached), len(tokens))
        # Asked every round with the whole context: the usual answer (the cache is a prefix of
        # it) comes from one C-level list comparison instead of a Python loop.
        if list(tokens[:limit]) == cached[:limit]:
            return limit
        common = 0
        while cached[common] == tokens[common]:
            common += 1
        return common

    def sync(self, tokens: Sequence[int]) -> int:
        """Make the cache hold a prefix of `tokens`, reusing the common prefix.

        Returns how many tokens of `tokens` are cached afterwards (the rest must be decoded by
        the caller, which then gets the logits it needs in the same pass).
        """
        common = self.cached_prefix(tokens)
        self.truncate(common)
        return common
