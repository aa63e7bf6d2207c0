"""A copy's source as the answer may quote it: JSON-escaped, or unescaped.

An agent reads a file raw and writes it back inside a call's JSON string argument, its
newlines written `\\n` and its quotes `\\"`; or reads it as a JSON tool result and writes it
raw (an XML-style call, its answer). Token for token the two spellings share little (a
line break is a different token from `\\n`), so a copy of the file breaks at every line's
end. A view is the source's text respelled and tokenized again by the target's own
tokenizer: a copy is found in it by the answer's ending and proposed from it, token for
token as the target would write the respelled text. Verification is unchanged, so the
answer is plain decoding's whatever a view proposes.

Which spelling the answer is writing is read from the answer itself (`Quoting`): inside a
JSON string of an object it writes escaped text. That decides only between copies whose
matches are equally long: a longer match in one spelling already says which it is writing.
"""

from __future__ import annotations

import copy
import enum
import json
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from specchat.engine.drafting.copies.matching import locate_in
from specchat.engine.drafting.copies.substitutions import Substitutions

#: JSON's escapes inside a string, as `json.loads` reads them.
_ESCAPE = re.compile(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Shortest match a view's copy is taken from: one token agrees by chance too often.
MIN_VIEW_MATCH = 2
#: How far back a view's match is followed (and the largest match length reported), as
#: lookup's own.
VIEW_EXTENT = 64


def escaped(text: str) -> str:
    """`text` as a JSON string's inside: what a call's arguments hold when they quote it."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def unescaped(text: str) -> str:
    """`text` with every JSON escape read back (a JSON string's inside as its value);
    anything else left as it is."""

    def read(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "u":
            return chr(int(code[1:], 16))
        return _SIMPLE[code]

    return _ESCAPE.sub(read, text)


class Spelling(enum.Enum):
    """How a view spells its source's text."""

    ESCAPED = enum.auto()  #: as a JSON string's inside
    UNESCAPED = enum.auto()  #: with its JSON escapes read back


@runtime_checkable
class Tokenizer(Protocol):
    """What a view needs of the target: its tokens' text and its tokenizer (a replay's
    recorded target has none: no views there)."""

    def tokenize(
        self, text: str, *, add_special: bool = False, parse_special: bool = True
    ) -> list[int]: ...

    def piece(self, token: int) -> bytes: ...


@dataclass(frozen=True)
class View:
    """A source's text respelled, in the target's tokens.

    Attributes:
        spelling: how it is respelled.
        tokens: its tokens, for the search.
        listed: the same tokens, for slices and proposals.
    """

    spelling: Spelling
    tokens: np.ndarray
    listed: tuple[int, ...]


@dataclass(frozen=True)
class ViewCopy:
    """A copy found in a view.

    Attributes:
        tokens: the proposal, in the view's spelling.
        match_len: how far back the text's ending agrees with the view there.
        spelling: the view's spelling.
    """

    tokens: tuple[int, ...]
    match_len: int
    spelling: Spelling


def text_of(tokens: Sequence[int], tokenizer: Tokenizer) -> str:
    """The text of `tokens` (control tokens render as nothing)."""
    return b"".join(tokenizer.piece(int(t)) for t in tokens).decode("utf-8", errors="replace")


def views_of(tokens: Sequence[int], tokenizer: Tokenizer) -> tuple[View, ...]:
    """The views of `tokens` that differ from it: escaped, unescaped (where the text holds
    JSON escapes)."""
    text = text_of(tokens, tokenizer)
    views = []
    for spelling, respell in ((Spelling.ESCAPED, escaped), (Spelling.UNESCAPED, unescaped)):
        respelled = respell(text)
        if respelled != text:
            # As text: a source's text cannot spell a control token (an end of turn).
            listed = tuple(tokenizer.tokenize(respelled, add_special=False, parse_special=False))
            views.append(View(spelling, np.asarray(listed, dtype=np.int64), listed))
    return tuple(views)


#: The last sources' views, shared by the drafters that copy from the same prompt (lookup
#: and the suffix drafter view it both): (the tokenizer, weakly held; source; views).
_RECENT: list[tuple[weakref.ref[Tokenizer], tuple[int, ...], tuple[View, ...]]] = []
_RECENT_SIZE = 4


def shared_views(source: tuple[int, ...], tokenizer: Tokenizer) -> tuple[View, ...]:
    """`views_of(source)`, made once for the drafters that view the same source."""
    for held, seen, views in _RECENT:
        if held() is tokenizer and seen == source:
            return views
    views = views_of(source, tokenizer) if source else ()
    _RECENT.insert(0, (weakref.ref(tokenizer), source, views))
    del _RECENT[_RECENT_SIZE:]
    return views


class Quoting:
    """Whether the answer is writing inside a JSON string of an object (a call's JSON
    arguments), read from its text as it grows.

    A guess from the text alone: raw code with an unclosed quote reads as inside one for
    a while. It only breaks ties between equally long matches (see the module's doc). A
    line break inside a string says the answer is not escaping what it quotes (a small
    model writes a file raw between the quotes): it reads as outside from then on.

    Attributes:
        in_string: the text so far ends inside a JSON string of an object, written
            escaped.
    """

    def __init__(self) -> None:
        self._in = False
        self._raw = False  # a line break was written inside a string: nothing is escaped
        self._depth = 0
        self._escape = False
        self._start = 0
        self._read = 0  # tokens of the text read so far

    @property
    def in_string(self) -> bool:
        return self._in and not self._raw

    def restart(self, start: int) -> None:
        """A new answer, starting after `start` tokens of prompt."""
        self._in = self._raw = self._escape = False
        self._depth = 0
        self._start = self._read = start

    def follow(self, text: Sequence[int], tokenizer: Tokenizer) -> bool:
        """Read what `text` added since the last call; whether it ends inside a string."""
        if len(text) < self._read:  # shorter than read: read the answer again
            self.restart(self._start)
        for token in text[self._read :]:
            for char in tokenizer.piece(int(token)).decode("utf-8", errors="ignore"):
                self._step(char)
        self._read = len(text)
        return self.in_string

    def _step(self, char: str) -> None:
        if self._in:
            if self._escape:
                self._escape = False
            elif char == "\\":
                self._escape = True
            elif char == '"':
                self._in = False
            elif char == "\n":
                self._raw = True
        elif char == "{":
            self._depth += 1
        elif char == "}":
            self._depth = max(0, self._depth - 1)
        elif char == '"' and self._depth > 0:
            self._in = True


@dataclass
class Followed:
    """What a search of the views follows along the answer, forked per search and kept
    once its round is observed (a search is pure, see CopyDrafter).

    Attributes:
        quoting: where the answer is writing.
        substitutions: each view's copy followed through the answer's substitutions, by
            its spelling.
    """

    quoting: Quoting = field(default_factory=Quoting)
    substitutions: dict[Spelling, Substitutions] = field(default_factory=dict)

    def fork(self) -> Followed:
        return Followed(
            copy.copy(self.quoting), {s: f.fork() for s, f in self.substitutions.items()}
        )


class Views:
    """The views of one source a copying drafter copies from, and the search in them.

    A copy of a view is carried through the answer's substitutions as the drafter's own
    copies are (a class renamed in a file written back inside a JSON string).

    Attributes:
        tokenizer: the target's, or None (a replay): no views then.
        views: the source's views for this answer.
        followed: where the answer is writing, and each view's copy followed through this
            answer's substitutions.
    """

    def __init__(self, target: object) -> None:
        """`target`: the pair's target, whose tokenizer the views are made with, if it has
        one."""
        self.tokenizer = target if isinstance(target, Tokenizer) else None
        self.views: tuple[View, ...] = ()
        self.followed = Followed()

    def begin(self, source: Sequence[int], answer_start: int) -> None:
        """A new answer: the views of `source`."""
        self.followed = Followed()
        self.followed.quoting.restart(answer_start)
        if self.tokenizer is None:
            return
        self.views = shared_views(tuple(int(t) for t in source), self.tokenizer)
        self.followed.substitutions = {view.spelling: _substitutions(view) for view in self.views}

    def fork(self) -> Followed:
        """A copy of what the views follow, for a search to follow further."""
        return self.followed.fork()

    def find(
        self, context: Sequence[int], k: int, max_extent: int, beats: int, followed: Followed
    ) -> ViewCopy | None:
        """The longest copy of a view after `context`, if its match is longer than `beats`
        (the drafter's own copy's) or as long and in the spelling the answer is writing;
        `followed` (from `fork`) is followed to here."""
        if self.tokenizer is None or k <= 0 or not self.views:
            return None
        in_string = followed.quoting.follow(context, self.tokenizer)
        best: ViewCopy | None = None
        for view in self.views:
            start, longest = locate_in(view.tokens, context, max_extent)
            tokens: Sequence[int] = view.listed[start : start + k] if start >= 0 else ()
            substitutions = followed.substitutions.get(view.spelling)
            if substitutions is not None:
                substitutions.track(context, longest, (start, longest))
                carried = substitutions.copy(context, k)
                if carried is not None and carried[0] and carried[1] >= longest:
                    tokens, longest = carried  # carried through a rename, it runs longer
            if not tokens or longest < MIN_VIEW_MATCH:
                continue
            # At a tie the drafter's own copy wins, unless the answer writes a JSON string.
            preferred = in_string and view.spelling is Spelling.ESCAPED
            beaten = longest > beats or (longest == beats and preferred)
            if beaten and (best is None or longest > best.match_len):
                best = ViewCopy(tuple(tokens), longest, view.spelling)
        return best


def _substitutions(view: View) -> Substitutions:
    """A copy of `view` followed through the answer's substitutions."""
    return Substitutions(
        lambda text: locate_in(view.tokens, text, VIEW_EXTENT), source=lambda text: view.listed
    )
