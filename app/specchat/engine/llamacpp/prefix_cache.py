"""Recent prompts' KV caches kept in memory, so a request that returns to an earlier prefix
(another editor's chat, a chat resumed after a detour) reads only what is new; and, given a
store, each chat's cache kept on disk after its answers, so a restarted server does not read
its chats again."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specchat.engine.llamacpp.kv_store import KVStore
    from specchat.engine.llamacpp.model import LlamaModel

log = logging.getLogger(__name__)

#: Memory the kept caches may take together; the least recently used go first.
DEFAULT_MAX_BYTES = 512 << 20
#: Shorter caches are not kept: each keep copies the state at a switch that may never come
#: back, and a hybrid's copy holds its whole recurrent state however short the text. Above
#: it, a copy (a memcpy of the rows, one recurrent state) costs far less than reading the
#: tokens again (docs/costs.md, "Kept states"), so two clients taking turns with short
#: first turns keep theirs.
MIN_TOKENS = 16
#: The part of the budget (1/ENDS_SHARE) one kept state's prompt-end states may take, a
#: hybrid's (PromptEnds.spread): the last two always, earlier ones as they fit, so an edit of
#: an early turn of a long chat reads from near it rather than from the chat's start.
ENDS_SHARE = 4
#: A model this many tokens behind the chat's answer is not written to disk after it.
BEHIND = 8
#: Where `specchat serve` keeps its chats' states (under the cache directory), apart from
#: the window's conversations' (workers.generation.KV_DIR), within its own budget.
API_KV_DIR = "api-kv"


@dataclass(frozen=True)
class _Snapshot:
    """One model's cache as it was: whose (see _key), the tokens it held and llama.cpp's
    state of them."""

    model: str
    tokens: tuple[int, ...]
    data: bytes
    #: What the model's followers (a draft head) held beside it (LlamaModel.follower_states).
    heads: tuple[Any, ...] = ()
    #: A recurrent model's states at its prompts' ends (LlamaModel.prompt_ends): a later
    #: prompt that parts within the kept text comes back to one of them.
    ends: tuple[tuple[int, bytes], ...] = ()

    @property
    def size_bytes(self) -> int:
        heads = sum(getattr(head, "size_bytes", 0) for head in self.heads)
        return len(self.data) + heads + sum(len(data) for _, data in self.ends)


class PrefixCache:
    """Keeps a model's cache before a prompt would cut it back, and brings one back when a
    later prompt starts with more of it than the cache holds.

    The cache itself already keeps the common prefix of consecutive prompts (the decoder's
    `sync`); this remembers the ones it had to let go. A position's keys and values depend
    only on the tokens before it, so a kept state cut back to the common prefix equals
    evaluating that prefix again.

    With a `store` (the window's kept conversations' files, engine/llamacpp/kv_store.py),
    each chat's cache is also written after its answers, under the chat's key, and read back
    when a prompt of that chat starts with more of it than memory and the cache hold: a
    restarted server (or one that crashed) reads only what is new, as the window does.

    Attributes:
        max_bytes: memory the kept states may take together.
        ends_bytes: memory one kept state's prompt-end states may take (a hybrid's).
        min_tokens: shortest cache worth keeping.
        store: where chats' caches are kept on disk (its own byte budget, least recently
            used first out), or None (memory only).
    """

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        min_tokens: int = MIN_TOKENS,
        store: KVStore | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.ends_bytes = max_bytes // ENDS_SHARE
        self.min_tokens = min_tokens
        self.store = store
        self._snapshots: list[_Snapshot] = []  # least recently used first

    @classmethod
    def on_disk(cls) -> PrefixCache:
        """A cache whose chats are also kept under the cache directory (API_KV_DIR)."""
        from specchat import paths
        from specchat.engine.llamacpp.kv_store import KVStore

        return cls(store=KVStore(paths.cache_dir() / API_KV_DIR))

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._snapshots)

    def __len__(self) -> int:
        return len(self._snapshots)

    def prepare(
        self, model: LlamaModel, prompt: Sequence[int], *, conversation: str | None = None
    ) -> int:
        """Before `model` reads `prompt`: keep what its cache would lose, and load a kept
        state holding more of `prompt` (from memory, else `conversation`'s on disk);
        returns how many tokens of it the cache holds."""
        held = self._from_memory(model, prompt)
        if self.store is None or conversation is None:
            return held
        try:
            return max(held, self.store.restore(model, conversation, prompt))
        except Exception:
            # A file that reads as nothing sensible: the prompt is read instead.
            log.warning("the kept state of %s could not be read", conversation, exc_info=True)
            model.reset()
            return 0

    def keep_on_disk(self, models: Sequence[LlamaModel], conversation: str) -> int:
        """After an answer: write what each model holds of `conversation` to the store (as
        the window keeps a conversation after each answer, so a crash loses nothing either);
        the bytes written. A model far behind the first (a draft model a plain answer left
        behind) is not written: its file would hold no more than before. A full disk or an
        unwritable directory is logged, never raised: the answer has gone out already."""
        if self.store is None or not models:
            return 0
        said = models[0].tokens
        written = 0
        for model in models:
            if len(said) - model.cached_prefix(said) > BEHIND:
                continue
            try:
                written += self.store.save(model, conversation)
            except Exception:
                log.warning(
                    "the state of %s could not be kept in %s",
                    conversation,
                    self.store.directory,
                    exc_info=True,
                )
        return written

    def _from_memory(self, model: LlamaModel, prompt: Sequence[int]) -> int:
        common = model.cached_prefix(prompt)
        if len(model.tokens) - common >= self.min_tokens:
            self._keep(model)
        best, best_common = None, common
        for snapshot in self._snapshots:
            if snapshot.model != _key(model):
                continue
            shared = _common_prefix(snapshot.tokens, prompt)
            if shared > best_common:
                best, best_common = snapshot, shared
        if best is None or best_common < self.min_tokens:
            return common
        if not self._load(model, best):
            return model.cached_prefix(prompt)
        model.truncate(best_common)
        self._snapshots.remove(best)
        self._snapshots.append(best)  # recently used: evicted last
        return best_common

    def _keep(self, model: LlamaModel) -> None:
        import llama_cpp

        tokens = tuple(model.tokens)
        # A kept state this one extends holds nothing more: replaced.
        self._snapshots = [
            s
            for s in self._snapshots
            if s.model != _key(model) or tokens[: len(s.tokens)] != s.tokens
        ]
        size = int(llama_cpp.llama_state_seq_get_size(model.context, 0))
        if size <= 0 or size > self.max_bytes:
            return
        buffer = (ctypes.c_ubyte * size)()
        written = int(llama_cpp.llama_state_seq_get_data(model.context, buffer, size, 0))
        if written <= 0:
            log.info("llama.cpp could not copy a cache's state")
            return
        heads = tuple(model.follower_states())
        ends = tuple(model.prompt_ends.spread(self.ends_bytes))
        data = bytes(buffer)[:written]
        self._snapshots.append(_Snapshot(_key(model), tokens, data, heads, ends))
        while self.size_bytes > self.max_bytes and len(self._snapshots) > 1:
            self._snapshots.pop(0)

    def _load(self, model: LlamaModel, snapshot: _Snapshot) -> bool:
        import llama_cpp

        model.reset()
        data = (ctypes.c_ubyte * len(snapshot.data)).from_buffer_copy(snapshot.data)
        read = int(llama_cpp.llama_state_seq_set_data(model.context, data, len(snapshot.data), 0))
        if not read:
            log.info("a kept state would not load; reading the prompt instead")
            model.reset()
            self._snapshots.remove(snapshot)
            return False
        model.adopt_state(snapshot.tokens, snapshot.heads)
        model.prompt_ends.load(snapshot.ends)
        return True

    def forget(self, model: LlamaModel) -> None:
        """Drop `model`'s kept states (it is being closed)."""
        self._snapshots = [s for s in self._snapshots if s.model != _key(model)]


def _key(model: LlamaModel) -> str:
    """Whose state a snapshot is: a state belongs to the weights and to the cache's key type
    (a pair loaded again finds its kept states; another file never does)."""
    return f"{model.path.resolve()}|{model.info.key_type}"


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
