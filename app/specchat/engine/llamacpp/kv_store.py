"""Conversations' KV cache kept on disk, so a follow-up after a restart need not re-read the
conversation: llama.cpp's per-sequence state files, bounded in total size."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specchat.engine.llamacpp.head_state import HeadState, load_head_state, save_head_state

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel

log = logging.getLogger(__name__)

#: Total size the store keeps; the least recently used conversations go first.
DEFAULT_MAX_BYTES = 1 << 30
#: Shorter caches are not kept: a file is written after every answer while it saves a read
#: only after a restart, and a hybrid's file holds its whole recurrent state however short
#: the text; so its floor stays above the prefix cache's (which copies at a switch).
MIN_TOKENS = 64
_STATE = ".kv"
#: The tokens a state holds and the state file's size and CRC-32 (NumPy's npz), checked
#: before llama.cpp reads it: its loader trusts the file (one cut short reads past its end
#: and fails an assertion, which aborts the process).
_TOKENS = ".tokens"
#: A recurrent model's states at its prompts' ends (LlamaModel.prompt_ends), beside its state.
_ENDS = ".ends"


class KVStore:
    """Per model file and conversation: the cache's state and the tokens it holds.

    A state is reused only for the part of a new prompt that starts with exactly the tokens
    it holds: the KV of a position depends on the tokens before it and nothing else, so a
    state loaded and cut back to the common prefix equals evaluating that prefix again.

    Attributes:
        directory: where the files live.
        max_bytes: their total size bound (evicting least recently used).
    """

    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes

    def _stem(self, model: LlamaModel, conversation: str) -> Path:
        import llama_cpp

        stat = model.path.stat()
        # The file's identity, llama.cpp's version and the cache's key type: a state belongs
        # to these weights, to the state format of the library that wrote it, and to keys
        # stored as they were written (F16 or Q8_0, see EXACT_KEY_TYPE).
        identity = f"{model.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|"
        identity += str(getattr(llama_cpp, "__version__", ""))
        if model.info.key_type != "F16":
            identity += f"|keys {model.info.key_type}"
        key = hashlib.sha256(identity.encode()).hexdigest()[:20]
        return self.directory / f"{key}-{_safe(conversation)}"

    def save(self, model: LlamaModel, conversation: str) -> int:
        """Keep what `model`'s cache holds for `conversation`; returns the bytes written."""
        import llama_cpp

        tokens = list(model.tokens)
        if len(tokens) < MIN_TOKENS or model.closed:
            return 0
        self.directory.mkdir(parents=True, exist_ok=True)
        stem = self._stem(model, conversation)
        state, token_file = stem.with_suffix(_STATE), stem.with_suffix(_TOKENS)
        partial = stem.with_suffix(".partial")
        array = (llama_cpp.llama_token * len(tokens))(*tokens)
        written = int(
            llama_cpp.llama_state_seq_save_file(
                model.context, str(partial).encode(), 0, array, len(tokens)
            )
        )
        if not written:
            partial.unlink(missing_ok=True)
            log.info("llama.cpp could not save the state of %s", conversation)
            return 0
        try:
            listed = _save_tokens(token_file, tokens, _fingerprint(partial))
            ends = _save_ends(model.prompt_ends.export(), stem.with_suffix(_ENDS))
            heads = self._save_heads(model, stem)
        except OSError:
            # A full disk: no half-written state is left to take the budget or to load.
            self.forget(model, conversation)
            partial.unlink(missing_ok=True)
            raise
        # Renamed into place last: a crash mid-write leaves no state that looks whole.
        os.replace(partial, state)
        self._evict(keep=state)
        return written + listed + ends + heads

    def restore(self, model: LlamaModel, conversation: str, prompt: Sequence[int]) -> int:
        """Load the kept state when it holds more of `prompt` than the cache does now.

        Returns how many leading tokens of `prompt` the cache holds afterwards from the file
        (0 when nothing was loaded: no file, a shorter match, or a file that would not load).
        """
        import llama_cpp

        stem = self._stem(model, conversation)
        state, token_file = stem.with_suffix(_STATE), stem.with_suffix(_TOKENS)
        if not state.exists() or not token_file.exists():
            return 0
        listed = _load_tokens(token_file)
        kept, fingerprint = listed if listed is not None else ([], (0, 0))
        common = _common_prefix(kept, prompt)
        if listed is not None and (common <= model.cached_prefix(prompt) or common < MIN_TOKENS):
            return 0
        if listed is None or _fingerprint(state) != fingerprint:
            log.warning(
                "the kept state of %s is not whole (cut short, or changed); re-reading",
                conversation,
            )
            self.forget(model, conversation)
            return 0
        model.reset()
        out = (llama_cpp.llama_token * len(kept))()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            model.context, str(state).encode(), 0, out, len(kept), ctypes.byref(count)
        )
        if not read or list(out[: count.value]) != kept:
            log.info("the kept state of %s would not load; re-reading instead", conversation)
            model.reset()
            self.forget_files(state, token_file)
            return 0
        heads = [load_head_state(file) for file in _head_files(stem)]
        model.adopt_state(kept, [head for head in heads if head is not None])
        model.prompt_ends.load(_load_ends(stem.with_suffix(_ENDS), len(kept)))
        model.truncate(common)  # what follows the common prefix belongs to another text
        os.utime(state)  # recently used: evicted last
        return common

    def _save_heads(self, model: LlamaModel, stem: Path) -> int:
        """Keep what the model's draft heads hold beside its state (an MTP head follows a
        restored chat at once, as in a fresh one); their bytes."""
        self.forget_files(*_head_files(stem))
        written = 0
        states = [s for s in model.follower_states() if isinstance(s, HeadState)]
        for i, state in enumerate(states):
            written += save_head_state(state, stem.with_suffix(f".head{i}"))
        return written

    def forget(self, model: LlamaModel, conversation: str) -> None:
        """Drop the kept state of `conversation` (deleted, or no longer wanted)."""
        stem = self._stem(model, conversation)
        self.forget_files(
            stem.with_suffix(_STATE),
            stem.with_suffix(_TOKENS),
            stem.with_suffix(_ENDS),
            *_head_files(stem),
        )

    @staticmethod
    def forget_files(*files: Path) -> None:
        for file in files:
            file.unlink(missing_ok=True)

    def total_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.directory.glob("*") if f.is_file())

    def _evict(self, *, keep: Path) -> None:
        states = sorted(self.directory.glob(f"*{_STATE}"), key=lambda f: f.stat().st_mtime)
        total = self.total_bytes()
        for state in states:
            if total <= self.max_bytes:
                break
            if state == keep:
                continue
            others = [state.with_suffix(_TOKENS), state.with_suffix(_ENDS)]
            others += _head_files(state.with_suffix(""))
            size = state.stat().st_size + sum(f.stat().st_size for f in others if f.exists())
            self.forget_files(state, *others)
            total -= size


def forget_conversation(directory: Path, conversation: str) -> int:
    """Erase every kept state of `conversation` (each model's); returns files removed.

    Needs no model (nor llama.cpp): called when a conversation is deleted, whose text must
    not stay on disk in any form.
    """
    removed = 0
    for file in directory.glob(f"*-{_safe(conversation)}.*"):
        file.unlink(missing_ok=True)
        removed += 1
    return removed


def _safe(conversation: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in conversation)[:64]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _head_files(stem: Path) -> list[Path]:
    """The files of a kept state's draft heads, in their followers' order."""
    return sorted(stem.parent.glob(f"{stem.name}.head*"))


def _save_ends(ends: Sequence[tuple[int, bytes]], path: Path) -> int:
    """Write a recurrent model's states at its prompts' ends (none: no file); their bytes."""
    if not ends:
        path.unlink(missing_ok=True)
        return 0
    positions = np.asarray([position for position, _ in ends], dtype=np.int64)
    sizes = np.asarray([len(data) for _, data in ends], dtype=np.int64)
    data = np.frombuffer(b"".join(data for _, data in ends), dtype=np.uint8)
    with path.open("wb") as file:
        np.savez(file, positions=positions, sizes=sizes, data=data)
    return int(sizes.sum())


def _load_ends(path: Path, n_tokens: int) -> list[tuple[int, bytes]]:
    """What _save_ends wrote, where it is whole and within the kept tokens ([] otherwise)."""
    if not path.exists():
        return []
    try:
        with np.load(path, allow_pickle=False) as saved:
            positions, sizes, data = saved["positions"], saved["sizes"], saved["data"]
    except (OSError, ValueError, KeyError):
        return []
    if len(positions) != len(sizes) or int(sizes.sum()) != len(data):
        return []
    ends, offset = [], 0
    for position, size in zip(positions.tolist(), sizes.tolist(), strict=True):
        if 0 < position <= n_tokens:
            ends.append((position, data[offset : offset + size].tobytes()))
        offset += size
    return ends


def _fingerprint(path: Path) -> tuple[int, int]:
    """A state file's size and CRC-32 (a few ms a hundred MB: the file was just written or
    is about to be read, so it is in the page cache)."""
    crc = 0
    with path.open("rb") as file:
        while chunk := file.read(16 << 20):
            crc = zlib.crc32(chunk, crc)
    return path.stat().st_size, crc


def _save_tokens(path: Path, tokens: Sequence[int], fingerprint: tuple[int, int]) -> int:
    """Write the tokens a state holds and its file's fingerprint; their bytes."""
    with path.open("wb") as file:
        np.savez(
            file,
            tokens=np.asarray(tokens, dtype=np.int32),
            state=np.asarray(fingerprint, dtype=np.int64),
        )
    return path.stat().st_size


def _load_tokens(path: Path) -> tuple[list[int], tuple[int, int]] | None:
    """What _save_tokens wrote (None: a file that does not read whole, or one written
    before fingerprints: its state is never given to llama.cpp)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            tokens, state = saved["tokens"].tolist(), saved["state"].tolist()
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if len(state) != 2:
        return None
    return tokens, (int(state[0]), int(state[1]))
