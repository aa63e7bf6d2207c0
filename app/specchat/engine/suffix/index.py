"""The suffix index over everything already said (this chat, earlier chats, attachments)."""

from __future__ import annotations

import enum
import threading
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from specchat.engine.suffix.automaton import SuffixAutomaton

#: Tokens of the context re-matched against a shard that appears mid-answer: matches longer
#: than this add nothing a draft could use.
TAIL = 64

#: When a new prompt departs from the indexed chat (a regenerated answer, an edited message),
#: the new chat document starts this many tokens before the departure, so matches reaching
#: back across it are still found.
OVERLAP = 64

#: Seconds the building thread waits for work before it ends.
IDLE_S = 30.0

#: An attachment's match this many tokens shorter than this chat's still names the attachment
#: as the source: the prompt holds the file too, after its name and fence, which the answer's
#: copy often repeats, so this chat's match runs a few tokens further back.
ATTACHMENT_MARGIN = 8

#: A state with more continuations than this has no usable favourite; walking them all would
#: cost more than a draft is worth.
MAX_FANOUT = 32


class Source(enum.Enum):
    """Where a continuation was found."""

    CHAT = "this chat"
    HISTORY = "an earlier chat"
    ATTACHMENT = "an attachment"


#: A match of the text's ending: (length, tie-break, automaton, state, source).
_Match = tuple[int, int, SuffixAutomaton, int, Source]


@dataclass(frozen=True)
class Continuation:
    """A proposed continuation of the text, read from earlier text.

    Attributes:
        tokens: the proposed tokens.
        match_len: how many tokens of the text's ending matched where it was found.
        counts: per token, how many times it followed there.
        shares: per token, its share of everything that followed there (1.0: always).
        source: where it was found.
    """

    tokens: tuple[int, ...]
    match_len: int
    counts: tuple[int, ...]
    shares: tuple[float, ...]
    source: Source


@dataclass(frozen=True)
class IndexStats:
    """Size of the index.

    Attributes:
        chat_tokens: tokens indexed for this chat.
        stored_tokens: tokens of stored documents (earlier chats, attachments).
        documents: stored documents.
        shards: searchable shards.
        pending: stored documents waiting to be (re)built into a shard.
        memory_bytes: approximate memory held by the automata.
    """

    chat_tokens: int
    stored_tokens: int
    documents: int
    shards: int
    pending: int
    memory_bytes: int


@dataclass(frozen=True)
class _Doc:
    key: Hashable
    tokens: tuple[int, ...]
    source: Source
    order: float


class _Shard:
    """Some stored documents in one automaton; never changed once published."""

    def __init__(self, docs: Sequence[_Doc]) -> None:
        self.docs = {doc.key: doc for doc in docs}
        self.source = docs[0].source
        self.size = sum(len(doc.tokens) for doc in docs)
        self.automaton = SuffixAutomaton()
        for doc in docs:
            self.automaton.start_document()
            self.automaton.extend(doc.tokens)


class SuffixIndex:
    """Finds the longest match of the text's ending in everything already said, and
    proposes what most often followed it.

    The current chat lives in one automaton, appended to as tokens are kept (the decoding
    thread's alone). Stored documents (earlier chats, attachments) live in shards of a bounded
    size, built off the decoding thread and published whole; each shard keeps a running match
    of the text's ending, so an appended token costs O(1) amortised per shard. Replacing or
    dropping a document unpublishes its shard at once, before the call returns, and the shard's
    other documents are rebuilt in the background: dropped text can never be proposed again.

    Attributes:
        max_stored_tokens: cap on stored tokens; the oldest documents are evicted past it.
        shard_tokens: target size of a shard (a shard is rebuilt whole when one of its
            documents changes, so small shards keep that cheap).
        max_chat_tokens: cap on this chat's automaton; past it, it restarts from the text's end.
    """

    def __init__(
        self,
        *,
        max_stored_tokens: int = 200_000,
        shard_tokens: int = 16_384,
        max_chat_tokens: int = 65_536,
        background: bool = True,
    ) -> None:
        self.max_stored_tokens = max_stored_tokens
        self.shard_tokens = shard_tokens
        self.max_chat_tokens = max_chat_tokens
        self._background = background
        self._lock = threading.Lock()
        self._docs: dict[Hashable, _Doc] = {}
        self._dirty: set[Hashable] = set()
        self._shards: tuple[_Shard, ...] = ()
        self._wake = threading.Condition(self._lock)
        self._busy = False
        self._deferred = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        # Set from any thread by forget_chat(); the decoding thread acts on it first thing.
        self._forget = False
        # Decoding-thread state.
        self._chat = SuffixAutomaton()
        self._said: list[int] = []
        self._matches: dict[_Shard, tuple[int, int]] = {}

    # --- stored documents (any thread) ---------------------------------------------------------
    def put(
        self,
        key: Hashable,
        tokens: Sequence[int],
        *,
        source: Source = Source.HISTORY,
        order: float = 0.0,
    ) -> None:
        """Index (or replace) a stored document; `order` ranks it for eviction (oldest first)."""
        tokens = tuple(int(t) for t in tokens[-self.max_stored_tokens :])
        with self._lock:
            old = self._docs.get(key)
            if old is not None and old.tokens == tokens and old.source == source:
                return
            self._unpublish(key)
            self._docs[key] = _Doc(key, tokens, source, order)
            self._dirty.add(key)
            self._evict()
        self._schedule()

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Put many documents, then build once (loading a whole history)."""
        with self._lock:
            self._deferred += 1
        try:
            yield
        finally:
            with self._lock:
                self._deferred -= 1
            self._schedule()

    def drop(self, key: Hashable) -> None:
        """Forget a document; once this returns it can never be proposed again."""
        with self._lock:
            self._unpublish(key)
            self._docs.pop(key, None)
            self._dirty.discard(key)
        self._schedule()

    def stored(self) -> set[Hashable]:
        with self._lock:
            return set(self._docs)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every stored document is searchable; False on timeout."""
        with self._wake:
            return self._wake.wait_for(lambda: not self._dirty and not self._busy, timeout)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def stats(self) -> IndexStats:
        with self._lock:
            shards = self._shards
            stored = sum(len(d.tokens) for d in self._docs.values())
            documents, pending = len(self._docs), len(self._dirty)
        memory = self._chat.memory_bytes() + sum(s.automaton.memory_bytes() for s in shards)
        return IndexStats(self._chat.tokens, stored, documents, len(shards), pending, memory)

    def _unpublish(self, key: Hashable) -> None:
        """Take the shard holding `key` out of search; its other documents wait for a rebuild."""
        for shard in self._shards:
            if key in shard.docs:
                self._shards = tuple(s for s in self._shards if s is not shard)
                self._dirty.update(k for k in shard.docs if k != key)
                return

    def _evict(self) -> None:
        total = sum(len(d.tokens) for d in self._docs.values())
        for doc in sorted(self._docs.values(), key=lambda d: d.order):
            if total <= self.max_stored_tokens:
                return
            self._unpublish(doc.key)
            del self._docs[doc.key]
            self._dirty.discard(doc.key)
            total -= len(doc.tokens)

    def _schedule(self) -> None:
        if self._deferred:
            return
        if not self._background:
            self._rebuild()
            return
        with self._wake:
            self._wake.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="suffix-index", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                woken = self._wake.wait_for(lambda: self._dirty or self._closed, IDLE_S)
                if self._closed or not woken:
                    # Idle: end, so an index nobody closes holds no thread; the next put
                    # starts another.
                    self._thread = None
                    return
            self._rebuild()

    def _rebuild(self) -> None:
        """Build shards for the dirty documents off the lock, then publish those still current."""
        with self._wake:
            if not self._dirty:
                return
            # New documents join the part-filled shards of their source, rebuilt with them,
            # so shards stay few (each costs a little per token) however documents arrive.
            sources = {self._docs[k].source for k in self._dirty}
            for shard in self._shards:
                if shard.source in sources and shard.size < self.shard_tokens:
                    self._shards = tuple(s for s in self._shards if s is not shard)
                    self._dirty.update(shard.docs)
            self._busy = True
            docs = [self._docs[k] for k in self._dirty]
            self._dirty.clear()
        try:
            built = [_Shard(group) for group in self._group(docs)]
        finally:
            with self._wake:
                for shard in built:
                    # A document replaced or dropped while its shard was being built must not
                    # come back: publish only shards whose documents are all still current.
                    if all(self._docs.get(k) is d for k, d in shard.docs.items()):
                        self._shards = (*self._shards, shard)
                    else:
                        self._dirty.update(k for k in shard.docs if k in self._docs)
                self._busy = False
                self._wake.notify_all()

    def _group(self, docs: Sequence[_Doc]) -> list[list[_Doc]]:
        groups: list[list[_Doc]] = []
        for source in Source:
            group: list[_Doc] = []
            size = 0
            for doc in sorted((d for d in docs if d.source == source), key=lambda d: d.order):
                if group and size + len(doc.tokens) > self.shard_tokens:
                    groups.append(group)
                    group, size = [], 0
                group.append(doc)
                size += len(doc.tokens)
            if group:
                groups.append(group)
        return groups

    # --- this chat (the decoding thread) -------------------------------------------------------
    def reset_chat(self) -> None:
        """Forget this chat (the decoding thread; see forget_chat for any other)."""
        self._forget = False
        self._chat = SuffixAutomaton()
        self._said = []
        self._matches = {}

    def forget_chat(self) -> None:
        """From any thread: nothing of this chat is proposed again (a conversation was
        deleted, and this chat's text may be its)."""
        self._forget = True

    def _forgetting(self) -> None:
        if self._forget:
            self.reset_chat()

    def prepare(self, prompt: Sequence[int]) -> None:
        """A new answer starts from `prompt`: index what is new in it."""
        self._forgetting()
        said = self._said
        common = 0
        for a, b in zip(said, prompt, strict=False):
            if a != b:
                break
            common += 1
        if said and common < len(prompt) // 2:
            # Mostly new text: another conversation. What was said before is in the store
            # (an earlier chat now), and "this chat" should mean this one.
            self.reset_chat()
            said, common = self._said, 0
        if self._chat.tokens + len(prompt) - common > self.max_chat_tokens:
            self._chat = SuffixAutomaton()
            self._chat.start_document()
            self._chat.extend(prompt[-self.max_chat_tokens // 2 :])
        elif common == len(said) and said:
            self._chat.extend(prompt[common:])
        else:
            # A departure (regenerate, edit): the old text stays indexed, the new one starts
            # a document of its own a little before the departure.
            self._chat.start_document()
            self._chat.extend(prompt[max(0, common - OVERLAP) :])
        self._said = list(prompt)
        self._matches = {}

    def extend(self, tokens: Sequence[int]) -> None:
        """Tokens kept after the text indexed so far."""
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        self._chat.append(token)
        self._said.append(token)
        for shard, (state, matched) in self._matches.items():
            self._matches[shard] = shard.automaton.advance(state, matched, token)

    def sync(self, context: Sequence[int]) -> None:
        """Bring the chat up to `context`: appends what follows the indexed text, or treats
        anything else as a new prompt."""
        self._forgetting()
        said = self._said
        if said and len(context) >= len(said) and context[len(said) - 1] == said[-1]:
            self.extend(context[len(said) :])
        else:
            self.prepare(context)

    @property
    def said(self) -> int:
        """Length of the text indexed for this chat."""
        return len(self._said)

    def propose(
        self, k: int, *, branches: int = 1, min_share: float = 0.2, min_match: int = 1
    ) -> list[Continuation]:
        """Up to `branches` continuations of up to k tokens each, best first, all from the
        source with the longest match; they share their first tokens and part where the
        runner-up continuation is still likely (a tree). Empty when nothing matches."""
        self._forgetting()
        if k <= 0:
            return []
        best: _Match | None = None
        chat = self._chat
        state = chat.last
        while state > 0 and not chat.children(state):
            state = chat.link(state)
        if state > 0:
            best = (chat.length(state), 1, chat, state, Source.CHAT)
        attached: _Match | None = None
        shards = self._shards
        for shard in shards:
            found = self._matches.get(shard)
            if found is None:
                found = shard.automaton.match(self._said[-TAIL:])
                self._matches[shard] = found
            auto = shard.automaton
            state, matched = found
            while state > 0 and not auto.children(state):
                state = auto.link(state)
                matched = auto.length(state)
            if state > 0 and (best is None or (matched, 0) > best[:2]):
                best = (matched, 0, auto, state, shard.source)
            longer = attached is None or matched > attached[0]
            if state > 0 and shard.source is Source.ATTACHMENT and longer:
                attached = (matched, 0, auto, state, shard.source)
        if attached is not None and best is not None and best[4] is Source.CHAT:
            best = _named_for_attachment(best, attached)
        if len(self._matches) > len(shards):
            self._matches = {s: m for s, m in self._matches.items() if s in shards}
        if best is None or best[0] < min_match:
            return []
        matched, _, auto, state, source = best
        return _tree(auto, state, matched, source, k, branches, min_share)


def _named_for_attachment(chat: _Match, attached: _Match) -> _Match:
    """This chat's match, or the attachment's where it is nearly as long: the file's text is
    the attachment's though the prompt holds it too. The match keeps this chat's length (the
    text's ending is found that long), so a copy is priced alike attached or pasted."""
    if attached[0] >= chat[0] - ATTACHMENT_MARGIN:
        return (chat[0], *attached[1:])
    return chat


def _walk(
    auto: SuffixAutomaton, state: int, k: int, min_share: float
) -> tuple[list[tuple[int, int, float]], list[tuple[int, int, int, float]]]:
    """The most frequent path from `state` (token, count, share per step; ties to the most
    recent), and the runner-up at each step (step, token, state, share)."""
    path: list[tuple[int, int, float]] = []
    runners: list[tuple[int, int, int, float]] = []
    while len(path) < k:
        children = auto.children(state)
        if len(children) == 1:
            # Text that went on one way only (a copy's usual case): nothing to rank.
            ((token, nxt),) = children.items()
            path.append((token, auto.count(nxt), 1.0))
            state = nxt
            continue
        if not children or len(children) > MAX_FANOUT:
            break
        ranked = sorted(
            ((auto.count(s), auto.recent(s), t, s) for t, s in children.items()), reverse=True
        )
        total = sum(r[0] for r in ranked)
        count, _, token, nxt = ranked[0]
        share = count / total
        if share < min_share:
            break
        if len(ranked) > 1:
            c2, _, t2, s2 = ranked[1]
            runners.append((len(path), t2, s2, c2 / total))
        path.append((token, count, share))
        state = nxt
    return path, runners


def _tree(
    auto: SuffixAutomaton,
    state: int,
    matched: int,
    source: Source,
    k: int,
    branches: int,
    min_share: float,
) -> list[Continuation]:
    path, runners = _walk(auto, state, k, min_share)
    if not path:
        return []
    found = [_continuation(path, matched, source)]
    if branches <= 1:
        return found
    # A branch is as likely as the path up to it times its own share.
    reach = [1.0]
    for _, _, share in path:
        reach.append(reach[-1] * share)
    ranked = sorted(runners, key=lambda r: (-round(reach[r[0]] * r[3], 9), r[0]))
    for step, token, nxt, share in ranked:
        if len(found) >= branches or share < min_share:
            break
        tail, _ = _walk(auto, nxt, k - step - 1, min_share)
        branch = [*path[:step], (token, auto.count(nxt), share), *tail]
        found.append(_continuation(branch, matched, source))
    return found


def _continuation(
    path: Sequence[tuple[int, int, float]], matched: int, source: Source
) -> Continuation:
    return Continuation(
        tokens=tuple(t for t, _, _ in path),
        match_len=matched,
        counts=tuple(c for _, c, _ in path),
        shares=tuple(s for _, _, s in path),
        source=source,
    )
