"""Edits that repeat: a copy broken by a substitution learns it and carries it on.

A rename (`x` → `per_customer`, `print(` → `log.info(`, `var` → `const`) breaks a copy at
every occurrence of the old name: the copied source says `x`, the answer writes
`per_customer`, the draft is refused there, and the copy has to be found again from a short
match, drafting small until the match grows. The first occurrence shows the edit: the
answer left the source at one place and rejoined it a few tokens later. From then on the
copy follows the source *through* that substitution — proposing the new name where the source
has the old one — and its match length keeps counting, so the drafts stay long.

A substitution is learnt only from a long copy that left its source and rejoined it for
several tokens, and it is dropped the moment the answer writes the old tokens where the
source has them (a change made in one place only).

The source is the text itself (lookup, the suffix index over this chat) or a document apart
from it (a request's prediction).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

#: A copy is followed once its match is this long (shorter ones are guesses, not copies).
MIN_ANCHOR = 8
#: At most this many source tokens replaced by one substitution...
MAX_OLD = 3
#: ... by at most this many new ones.
MAX_NEW = 8
#: Tokens that must agree with the source after the new ones for the detour to count as a
#: substitution (two can agree by chance: `):` and a newline).
RESYNC = 3
#: Substitutions kept per answer.
MAX_RULES = 8

#: Where the text's ending occurred before: (start of what followed there, match length), or
#: (-1, 0). Prompt lookup's search.
Locate = Callable[[Sequence[int]], tuple[int, int]]
#: The tokens a copy of the text is taken from, given the text (a document apart from it).
Source = Callable[[Sequence[int]], Sequence[int]]


class Substitutions:
    """Follows a long copy through the substitutions this answer has made.

    Attributes:
        rules: old source tokens → what the answer writes instead.
    """

    def __init__(self, locate: Locate, *, source: Source | None = None) -> None:
        """`locate` finds the text's ending in the source; `source` gives the document
        copied from, where that is not the text itself (`locate`'s positions are then
        positions in it)."""
        self._locate = locate
        self._source = source
        self.rules: dict[tuple[int, ...], tuple[int, ...]] = {}
        # A live copy: text position i matches source position j, after `run` tokens of copy
        # (`run` counts from where it last rejoined its source, if it did).
        self._anchor: tuple[int, int, int] | None = None
        # Where a long copy left its source: (text position, source position).
        self._departure: tuple[int, int] | None = None
        # The live copy began as a long one (before a detour it came back from): its next
        # detour may teach a substitution however short its run since.
        self._long = False

    def restart(self) -> None:
        """A new answer: what the last one renamed says nothing about this one."""
        self.rules.clear()
        self._anchor = None
        self._departure = None
        self._long = False

    def fork(self) -> Substitutions:
        """A copy to follow further without changing this one (a search is pure: the round
        that uses it keeps the copy)."""
        other = copy.copy(self)
        other.rules = dict(self.rules)
        return other

    def track(
        self, text: Sequence[int], match_len: int, where: tuple[int, int] | None = None
    ) -> None:
        """Follow the copy over what the text added since the last call. `match_len` is the
        longest match the drafter sees at the text's end: a copy's source is searched for
        only when that is long enough (text that matches nothing long costs no search);
        `where` is that match's (source position, length) if the drafter has it already."""
        n = len(text)
        if self._anchor is not None:
            self._advance(text)
        if self._departure is not None and self._anchor is None:
            self._rejoin(text)
        if self._anchor is None and self._departure is None and match_len >= MIN_ANCHOR:
            start, extent = where if where is not None else self._locate(text)
            if start >= 0 and extent >= MIN_ANCHOR:
                self._anchor = (n, start, extent)
                self._long = False

    def copy(self, text: Sequence[int], k: int) -> tuple[tuple[int, ...], int] | None:
        """The live copy's next k tokens with this answer's substitutions applied, and its
        length so far; None while no copy is live or no substitution has been learnt (plain
        lookup proposes the same then)."""
        anchor = self._anchor
        if anchor is None or not self.rules or k <= 0:
            return None
        i, j, run = anchor
        source = self._source_of(text)
        out: list[int] = []
        if i < len(text):
            # The text stopped halfway through a substitution's new tokens: the rest first.
            rule = self._rule_at(source, j)
            if rule is None:
                return None
            old, new = rule
            out.extend(new[len(text) - i :])
            j += len(old)
        while len(out) < k and j < len(source):
            rule = self._rule_at(source, j)
            if rule is not None:
                old, new = rule
                out.extend(new)
                j += len(old)
            else:
                out.append(int(source[j]))
                j += 1
        return tuple(out[:k]), run

    def _source_of(self, text: Sequence[int]) -> Sequence[int]:
        return text if self._source is None else self._source(text)

    def _rule_at(
        self, source: Sequence[int], j: int
    ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        for old, new in self.rules.items():
            if tuple(source[j : j + len(old)]) == old:
                return old, new
        return None

    def _advance(self, text: Sequence[int]) -> None:
        """Walk the copy forward; note where the text left it."""
        assert self._anchor is not None
        i, j, run = self._anchor
        source = self._source_of(text)
        n = len(text)
        while i < n:
            # The copy ran into the text itself (not a copy of earlier text), or off the
            # end of its document.
            if j >= (i if self._source is None else len(source)):
                self._anchor = None
                return
            rule = self._rule_at(source, j)
            if rule is not None:
                old, new = rule
                written = tuple(text[i : i + len(old)])
                if written == old:
                    # The answer kept the old tokens here: a change made in one place only.
                    del self.rules[old]
                    continue
                seen = tuple(text[i : min(n, i + len(new))])
                if seen == new:
                    i, j, run = i + len(new), j + len(old), run + len(new)
                    continue
                if seen == new[: len(seen)]:
                    break  # halfway through the new tokens: wait for the rest
            elif text[i] == source[j]:
                i, j, run = i + 1, j + 1, run + 1
                continue
            self._departure = (i, j) if run >= MIN_ANCHOR or self._long else None
            self._anchor = None
            return
        self._anchor = (i, j, run)

    def _rejoin(self, text: Sequence[int]) -> None:
        """Has the text rejoined the source a few tokens after it left? Then the detour was
        a substitution: learn it, and follow the copy again (as a new copy: one occurrence
        is a guess, the next ones are what the substitution buys)."""
        assert self._departure is not None
        q, s = self._departure
        source = self._source_of(text)
        n = len(text)
        for new_len in range(1, min(MAX_NEW, n - q - RESYNC) + 1):
            after = tuple(text[q + new_len : q + new_len + RESYNC])
            for old_len in range(1, MAX_OLD + 1):
                if tuple(source[s + old_len : s + old_len + RESYNC]) == after:
                    old = tuple(int(t) for t in source[s : s + old_len])
                    new = tuple(text[q : q + new_len])
                    if old != new and (len(self.rules) < MAX_RULES or old in self.rules):
                        self.rules[old] = new
                    self._departure = None
                    self._anchor = (q + new_len, s + old_len, 0)
                    self._long = True
                    self._advance(text)
                    return
        if n - q > MAX_NEW + RESYNC:
            self._departure = None  # new text, not a substitution
