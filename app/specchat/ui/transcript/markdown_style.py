"""Inline Markdown in an answer line: where bold, italics, inline code, headings and list
markers are, so their formats can be laid over the token colours without changing the text."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Inline(enum.Enum):
    """What a range of a line is."""

    MARKER = enum.auto()  #: markup characters (`**`, a backtick, `#`): hidden
    BOLD = enum.auto()
    ITALIC = enum.auto()
    CODE = enum.auto()  #: inline code: monospace on the code background
    HEADING = enum.auto()
    BULLET = enum.auto()  #: a list item's `-`/`*`/`+`: hidden, a bullet shown before it


@dataclass(frozen=True)
class InlineRange:
    """A styled range of one line.

    Attributes:
        start, end: character offsets into the line (end excluded).
        kind: how it is shown.
    """

    start: int
    end: int
    kind: Inline


_HEADING = re.compile(r"^(#{1,6} )(.+)$")
_BULLET = re.compile(r"^\s*([-*+]) \S")
_CODE = re.compile(r"(?<!`)(`)[^`\n]+`(?!`)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![*\w])([*_])(?=\S)(.+?)(?<=\S)\1(?![*\w])")


def inline_ranges(line: str) -> list[InlineRange]:
    """The Markdown of one complete line of prose (not a code block line)."""
    ranges: list[InlineRange] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    heading = _HEADING.match(line)
    if heading:
        ranges.append(InlineRange(0, heading.end(1), Inline.MARKER))
        ranges.append(InlineRange(heading.end(1), len(line), Inline.HEADING))
    bullet = _BULLET.match(line)
    if bullet:
        ranges.append(InlineRange(bullet.start(1), bullet.end(1), Inline.BULLET))
        taken.append((bullet.start(1), bullet.end(1)))
    for pattern, kind in ((_CODE, Inline.CODE), (_BOLD, Inline.BOLD), (_ITALIC, Inline.ITALIC)):
        for match in pattern.finditer(line):
            if free(match.start(), match.end()):
                _add_paired(ranges, taken, match, kind)
    return sorted(ranges, key=lambda r: (r.start, r.end))


def _add_paired(
    ranges: list[InlineRange], taken: list[tuple[int, int]], match: re.Match[str], kind: Inline
) -> None:
    marker = len(match.group(1))
    start, end = match.start(), match.end()
    ranges.append(InlineRange(start, start + marker, Inline.MARKER))
    ranges.append(InlineRange(start + marker, end - marker, kind))
    ranges.append(InlineRange(end - marker, end, Inline.MARKER))
    taken.append((start, end))
