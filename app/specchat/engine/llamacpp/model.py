"""Thin wrapper over llama.cpp's low-level API: load, batched decode, KV rollback, tokens."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp.backend import default_threads, ensure_backend
from specchat.engine.llamacpp.ctrl_c import ctrl_c_held
from specchat.engine.llamacpp.load import (
    ContextFullError,
    DecodeError,
    LoadCancelled,
    LoadInfo,
    ModelLoadError,
    ProgressCallback,
    check_file,
    create_context,
    decode_failure,
    is_recurrent,
    load_info,
    load_weights,
    offloaded_layers,
    read_metadata,
)
from specchat.engine.llamacpp.logits_view import LogitsView
from specchat.engine.llamacpp.recurrent_state import (
    SNAPSHOT_DEPTH,
    PromptEnds,
    Rollback,
    StateCheckpoint,
    restore_latest,
)
from specchat.engine.llamacpp.special_tokens import spelled_tokens
from specchat.engine.types import SpecialToken

if TYPE_CHECKING:
    from specchat.engine.llamacpp.follower import CacheFollower
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget

__all__ = [
    "MAX_BRANCHES",
    "ContextFullError",
    "DecodeError",
    "LlamaModel",
    "LoadCancelled",
    "LoadInfo",
    "ModelLoadError",
    "ProgressCallback",
]

log = logging.getLogger(__name__)


#: Most drafts one tree pass checks (sequences per context).
MAX_BRANCHES = 4


class LlamaModel:
    """One GGUF model with one context and one sequence, tracking what its KV cache holds.

    Attributes:
        info: what loading did.
        tokens: the tokens whose keys and values are in the cache, in order.
        n_vocab: vocabulary size (rows of logits).
        n_ctx: context window.
        n_batch: most tokens one llama_decode call is handed.
        max_branches: most drafts one `decode_tree` pass checks (1 for a recurrent model).
        rollback: how the cache drops its last tokens (see recurrent_state): natively for an
            attention cache; for a recurrent or hybrid model (Mamba, Qwen3.5, Jamba...) by
            llama.cpp's state snapshots where the architecture has them, else by a
            checkpoint taken at `mark`.
        can_rollback: whether rejected drafts can be dropped without evaluating the whole
            context again.
        end_of_turn: tokens that end a turn besides the vocabulary's end-of-generation set.
    """

    #: The vocabulary's special tokens by spelling, read on first use (special_tokens).
    _specials: dict[str, SpecialToken] | None = None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        n_batch: int = 512,
        exact_keys: bool = True,
        snapshot_depth: int = SNAPSHOT_DEPTH,
        load_mtp: bool = False,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        remote: RemoteTarget | None = None,
    ) -> None:
        """Load `path`; `exact_keys=False` keeps a CPU context's keys in F16 (llama.cpp's
        default) instead of EXACT_KEY_TYPE (engine/llamacpp/load.py). A recurrent model asks
        for `snapshot_depth` state snapshots (used where its architecture supports them);
        `load_mtp` loads its MTP layers (drafting/mtp/), `remote` spreads it (rpc_placement)."""
        ensure_backend()
        self.path = Path(path)
        check_file(self.path)
        self._model: llama_cpp.llama_model_p | None = None
        self._ctx: llama_cpp.llama_context_p | None = None
        self._batch: llama_cpp.llama_batch | None = None
        self.tokens: list[int] = []
        # The last decode_tree: where it began and its paths, for keep_path.
        self._tree: tuple[int, list[list[int]]] = (0, [])
        self._pieces: dict[int, bytes] = {}
        self._followers: list[CacheFollower] = []
        # Where the last decode call began (its tokens are what snapshots can drop) and
        # whether a snapshot rollback was used since (llama.cpp allows one per decode).
        self._last_call_start = 0
        self._snapshot_used = False
        self.end_of_turn: frozenset[int] = frozenset()
        threads = n_threads or default_threads(self.path.stat().st_size)
        # llama.cpp calls back into Python while it loads (its log, the progress callback):
        # Ctrl-C there is held and raised once it returns (see ctrl_c_held).
        with ctrl_c_held(self.close):
            model = self._model = load_weights(
                self.path,
                n_gpu_layers=n_gpu_layers,
                progress=progress,
                cancel=cancel,
                load_mtp=load_mtp,
                remote=remote,
            )
            recurrent = is_recurrent(model)
            # A recurrent model would hold a whole state per sequence of a tree pass, and
            # never drafts anyway.
            self.max_branches = 1 if recurrent else MAX_BRANCHES
            gpu_layers, backend = offloaded_layers(model, n_gpu_layers)
            try:
                ctx, key_type = create_context(
                    model,
                    name=self.path.name,
                    n_ctx=n_ctx,
                    n_batch=n_batch,
                    n_threads=threads,
                    n_seq_max=self.max_branches,
                    exact_keys=exact_keys and not gpu_layers,
                    n_rs_seq=snapshot_depth if recurrent else 0,
                    abort_on_lost_server=remote is not None,
                )
            except ModelLoadError:
                self.close()
                raise
            self._ctx = ctx
        self.has_mtp = load_mtp and int(llama_cpp.llama_model_n_layer_nextn(model)) > 0
        self.snapshot_depth = int(llama_cpp.llama_n_rs_seq(ctx)) if recurrent else 0
        if not recurrent:
            self.rollback = Rollback.CACHE
        elif self.snapshot_depth:
            self.rollback = Rollback.SNAPSHOTS
        else:
            self.rollback = Rollback.CHECKPOINT
        self._checkpoint = StateCheckpoint(ctx)
        # The states at prompts' ends (mark_prompt), kept with a kept state too.
        self.prompt_ends = PromptEnds(ctx)
        self.can_rollback = not recurrent or self._checkpoint.save(0)
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._memory = llama_cpp.llama_get_memory(ctx)
        self.info = load_info(
            model,
            ctx,
            path=self.path,
            gpu_layers=gpu_layers,
            backend=backend,
            n_threads=threads,
            key_type=key_type,
            remote=remote.key() if remote is not None else "",
        )
        self.n_vocab = self.info.n_vocab
        self.n_ctx = self.info.n_ctx
        self._logits = LogitsView(ctx, self.n_vocab)
        # llama.cpp clamps the batch to the context and ABORTS on a larger decode: read back
        # the sizes it really uses and never hand it more in one call.
        self.n_batch = min(
            int(llama_cpp.llama_n_batch(ctx)), int(llama_cpp.llama_n_ubatch(ctx)), self.n_ctx
        )
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, self.max_branches)

    # --- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        for follower in list(self._followers):
            follower.close()
        self._followers.clear()
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

    def spell_tokens(self, texts: Sequence[str]) -> None:
        """Render the tokens spelled `texts` as their text, control ones too (gpt-oss's)."""
        for text in texts:
            if (token := self.single_token(text)) is not None and self.token_text(token) == text:
                self._pieces[token] = text.encode("utf-8")

    def special_tokens(self) -> dict[str, SpecialToken]:
        """Every token llama.cpp finds in a text by its spelling (control, unknown and
        user-defined tokens), by spelling; read from the vocabulary once."""
        if self._specials is None:
            self._specials = spelled_tokens(self._vocab, self.n_vocab)
        return self._specials

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
        """The GGUF metadata value stored under `key`, as text; None when the file has none."""
        if self._model is None:
            raise ValueError(f"{self.path.name} is closed")
        return read_metadata(self._model, key)

    def chat_template(self) -> str | None:
        return self.metadata("tokenizer.chat_template")

    # --- decoding ----------------------------------------------------------------------------
    @property
    def context(self) -> Any:
        """The llama.cpp context (for engine.kv_store's state save and load)."""
        return self._ctx

    @property
    def model_handle(self) -> Any:
        """The llama.cpp model (a draft head's context runs over its weights)."""
        return self._model

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def room(self) -> int:
        """How many more tokens fit in the context."""
        return self.n_ctx - len(self.tokens)

    def mark(self, rows: int | None = None) -> None:
        """Remember the cache as it is now, so `truncate` can come back here cheaply.

        Nothing to do for an attention cache, nor for state snapshots when the tokens to be
        dropped will all come from the next decode call of `rows` tokens (a verify pass).
        Otherwise the recurrent state is saved (see recurrent_state.StateCheckpoint).
        """
        if self.rollback is Rollback.CACHE:
            return
        if (
            self.rollback is Rollback.SNAPSHOTS
            and rows is not None
            and rows - 1 <= self.snapshot_depth
        ):
            return
        if self._checkpoint.position != len(self.tokens):
            self._checkpoint.save(len(self.tokens))

    def mark_prompt(self) -> None:
        """Keep a recurrent state at a prompt's end: a later prompt that parts from this one
        in its answer (earlier thinking dropped, an edit, a regenerate) comes back here."""
        if self.rollback is not Rollback.CACHE:
            self.prompt_ends.save(len(self.tokens))

    def checkpoint_round_trip(self) -> None:
        """Save the recurrent state and put it back: what a checkpoint rollback costs beyond
        evaluating the kept tokens again (timed into the cost table)."""
        self._checkpoint.save(len(self.tokens))
        self._checkpoint.restore()

    @property
    def checkpoint_bytes(self) -> int:
        """Bytes of the recurrent state `mark` saves (0 for an attention cache)."""
        return self._checkpoint.size

    def truncate(self, n_keep: int) -> None:
        """Drop every cached token from position n_keep on (KV rollback)."""
        if n_keep >= len(self.tokens):
            return
        if self.rollback is Rollback.CACHE:
            if llama_cpp.llama_memory_seq_rm(self._memory, 0, n_keep, -1):
                self._cut(n_keep)
                return
        elif self._snapshots_cover(n_keep) and llama_cpp.llama_memory_seq_rm(
            self._memory, 0, n_keep, -1
        ):
            self._snapshot_used = True
            self._cut(n_keep)
            return
        kept = self.tokens[:n_keep]
        start = restore_latest((self._checkpoint, *self.prompt_ends.saved), n_keep)
        if start is not None:
            # The recurrent state is back at `start`; the attention layers drop the rest.
            llama_cpp.llama_memory_seq_rm(self._memory, 0, start, -1)
            self._cut(start)
        else:
            # Evaluate the kept tokens again, so the cache still holds exactly
            # `tokens[:n_keep]` (slow, but never wrong).
            self.reset()
        if len(kept) > len(self.tokens):
            self.decode(kept[len(self.tokens) :], logits="none")

    def adopt_state(self, tokens: Sequence[int], followers: Sequence[Any] = ()) -> None:
        """The cache now holds `tokens`, loaded into the context from outside (a kept
        state): nothing of it can be dropped natively, no checkpoint describes it, and each
        follower adopts its state kept with it (`followers`, from `follower_states`)."""
        self._cut(0)
        self.tokens[:] = list(tokens)
        self._last_call_start = len(self.tokens)
        self._snapshot_used = True
        for follower, state in zip(self._followers, followers, strict=False):
            follower.adopt(state)

    def follower_states(self) -> list[Any]:
        """What each follower holds now, kept beside this cache's state (see adopt_state)."""
        return [follower.state() for follower in self._followers]

    def put_back_after_raw_decodes(self) -> None:
        """Bring the cache back to `tokens` after llama.cpp decoded past them directly (the
        bench's C++ loop): an attention cache drops the rest; a recurrent one comes back
        from the checkpoint `mark` took at this length, else reads its text again."""
        n = len(self.tokens)
        if self.rollback is Rollback.CACHE:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, n, -1)
            return
        if self._checkpoint.position == n and self._checkpoint.restore():
            llama_cpp.llama_memory_seq_rm(self._memory, 0, n, -1)
        else:
            kept = list(self.tokens)
            self.reset()
            if kept:
                self.decode(kept, logits="none")
        self._last_call_start = n
        self._snapshot_used = True

    def _snapshots_cover(self, n_keep: int) -> bool:
        """Whether llama.cpp's snapshots hold the state after token n_keep − 1: it must be
        one of the last decode call's tokens, within the depth, with no rollback since."""
        return (
            self.rollback is Rollback.SNAPSHOTS
            and not self._snapshot_used
            and n_keep > self._last_call_start
            and len(self.tokens) - n_keep <= self.snapshot_depth
        )

    def _cut(self, n_keep: int) -> None:
        del self.tokens[n_keep:]
        self._checkpoint.forget_from(n_keep)
        self.prompt_ends.forget_from(n_keep)
        for follower in list(self._followers):
            follower.dropped(n_keep)

    def follow(self, follower: CacheFollower) -> None:
        """Tell `follower` of every decode and every drop from now on (an MTP head's own
        cache mirrors the target's). Tree passes stop: a follower reads the hidden state of
        each kept token in order, which a tree's branches interleave."""
        self._followers.append(follower)
        self.max_branches = 1

    def unfollow(self, follower: CacheFollower) -> None:
        if follower in self._followers:
            self._followers.remove(follower)

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(self._memory, True)
        self._cut(0)

    def decode(
        self, tokens: Sequence[int], *, logits: str = "last", copy: bool = True
    ) -> np.ndarray:
        """Append `tokens` to the cache and return logits (`logits`: 'last' for the final row
        only, 'all' for one row per token, 'none'): an array of shape (rows, n_vocab), rows = 0
        for 'none', copied out of llama.cpp; `copy=False` lends its own rows where one pass
        holds them all, valid until the next decode (LogitsView)."""
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
            n_out = len(chunk) if logits == "all" else int(logits == "last" and last_chunk)
            self._decode_chunk(chunk, [False] * (len(chunk) - n_out) + [True] * n_out)
            if n_out:
                block = self._logits.rows(n_out)
                rows.append(block if not copy and start == 0 and last_chunk else block.copy())
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
            raise DecodeError(decode_failure(status))
        self.tokens.extend(chunk)
        self._last_call_start = base
        self._snapshot_used = False
        for follower in self._followers:
            follower.decoded(chunk, base)

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
            raise DecodeError(decode_failure(status))
        block = self._logits.rows(len(tokens)).copy()
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
