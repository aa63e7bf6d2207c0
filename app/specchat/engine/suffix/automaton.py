"""An online generalised suffix automaton over token ids, with occurrence counts per state."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

#: How far up the suffix links an append propagates its occurrence during incremental
#: counting. Past it, counts of very short (and very frequent) strings become lower bounds:
#: an unbounded walk is O(n) per token on degenerate text such as one token repeated.
COUNT_DEPTH = 48


class SuffixAutomaton:
    """Every substring of every indexed document, as paths from the root.

    A state stands for a set of substrings that end at the same positions; following a
    token from a state spells a longer substring, so any path from a state reached by a
    match is a real continuation of that match somewhere in the text. Documents are kept
    apart (a generalised automaton): no substring spans two of them.

    `count(state)` is how many times the state's substrings occur (across documents), so a
    continuation can be scored by how often each next token followed.

    Attributes:
        tokens: how many tokens have been indexed.
        documents: how many documents were started.
    """

    __slots__ = ("_count", "_last", "_len", "_link", "_next", "_recent", "documents", "tokens")

    def __init__(self) -> None:
        self._next: list[dict[int, int]] = [{}]
        self._link: list[int] = [-1]
        self._len: list[int] = [0]
        # Occurrences per state, kept up to date on every append (bounded by COUNT_DEPTH).
        self._count: list[int] = [0]
        # Where each state last occurred (tokens indexed by then): ties go to the most recent,
        # since nearby text predicts best.
        self._recent: list[int] = [0]
        self._last = 0
        self.tokens = 0
        self.documents = 0

    # --- building ----------------------------------------------------------------------------
    def start_document(self) -> None:
        """What is appended next begins a new document (no match spans the boundary)."""
        self._last = 0
        self.documents += 1

    def extend(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.append(token)

    def append(self, token: int) -> None:
        """Append one token to the current document (amortised O(1))."""
        nxt, link, length = self._next, self._link, self._len
        last = self._last
        self.tokens += 1
        q = nxt[last].get(token)
        if q is not None:
            # The extended string already occurs (generalised automaton: a document repeats
            # earlier text); reuse its state, splitting it when it also holds longer strings.
            if length[q] != length[last] + 1:
                q = self._clone(last, token, q)
            self._last = q
            self._occur(q)
            return
        cur = self._new(length[last] + 1, {}, 0)
        p = last
        while p != -1 and token not in nxt[p]:
            nxt[p][token] = cur
            p = link[p]
        if p == -1:
            link[cur] = 0
        else:
            q = nxt[p][token]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                link[cur] = self._clone(p, token, q)
        self._last = cur
        self._occur(cur)

    def _new(self, size: int, transitions: dict[int, int], count: int) -> int:
        self._next.append(transitions)
        self._link.append(-1)
        self._len.append(size)
        self._count.append(count)
        self._recent.append(0)
        return len(self._len) - 1

    def _clone(self, p: int, token: int, q: int) -> int:
        nxt, link = self._next, self._link
        # The clone ends where q ends, plus the new position, which _occur adds.
        clone = self._new(self._len[p] + 1, dict(nxt[q]), self._count[q])
        self._recent[clone] = self._recent[q]
        link[clone] = link[q]
        link[q] = clone
        while p != -1 and nxt[p].get(token) == q:
            nxt[p][token] = clone
            p = link[p]
        return clone

    def _occur(self, state: int) -> None:
        count, link, recent, now = self._count, self._link, self._recent, self.tokens
        for _ in range(COUNT_DEPTH):
            if state <= 0:
                return
            count[state] += 1
            recent[state] = now
            state = link[state]

    # --- reading -----------------------------------------------------------------------------
    @property
    def last(self) -> int:
        """The state of the current document's whole text so far."""
        return self._last

    @property
    def states(self) -> int:
        return len(self._len)

    def length(self, state: int) -> int:
        """Length of the longest substring the state stands for."""
        return self._len[state]

    def link(self, state: int) -> int:
        """The state of the longest suffix that ends at more places (-1 for the root)."""
        return self._link[state]

    def count(self, state: int) -> int:
        return self._count[state]

    def recent(self, state: int) -> int:
        """How many tokens had been indexed when the state last occurred."""
        return self._recent[state]

    def children(self, state: int) -> dict[int, int]:
        """Token → next state; read-only."""
        return self._next[state]

    def advance(self, state: int, matched: int, token: int) -> tuple[int, int]:
        """The longest match after `token` follows a text whose longest match was
        (state, matched): amortised O(1), so a running match costs nothing per token."""
        nxt, link, length = self._next, self._link, self._len
        while state > 0 and token not in nxt[state]:
            state = link[state]
            matched = length[state]
        target = nxt[state].get(token)
        if target is None:
            return 0, 0
        return target, matched + 1

    def match(self, text: Sequence[int]) -> tuple[int, int]:
        """(state, length) of the longest suffix of `text` found in the automaton."""
        state, matched = 0, 0
        for token in text:
            state, matched = self.advance(state, matched, token)
        return state, matched

    def contains(self, text: Sequence[int]) -> bool:
        state = 0
        for token in text:
            nxt = self._next[state].get(token)
            if nxt is None:
                return False
            state = nxt
        return True

    def memory_bytes(self) -> int:
        """Approximate bytes held (lists, transition dicts, boxed ints)."""
        lists = (self._next, self._link, self._len, self._count, self._recent)
        size = sum(sys.getsizeof(x) for x in lists)
        size += sum(sys.getsizeof(d) for d in self._next)
        # Ints above 256 are boxed: roughly one per stored link, length, count and position,
        # and one per transition value.
        size += 28 * (4 * len(self._len) + sum(len(d) for d in self._next))
        return size
