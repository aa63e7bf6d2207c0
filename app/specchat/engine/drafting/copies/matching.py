"""Where the text's ending occurred before: the match every copying drafter starts from."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Candidates few enough to measure one by one (by comparing slices) in `locate`.
FEW = 8


def locate(context: Sequence[int], max_extent: int = 64) -> tuple[int, int]:
    """Where the text's ending occurred before: (position of the token that followed there,
    how far back it agrees, at most `max_extent`), or (-1, 0).

    The occurrence that agrees furthest back wins; among equal ones the most recent.
    """
    n_ctx = len(context)
    if n_ctx < 2:
        return -1, 0
    tokens = np.asarray(context, dtype=np.int64)
    # Earlier occurrences of the final token; the final position itself is excluded since
    # nothing follows it yet. All of them agree with the text's ending over `width` tokens.
    ends = np.flatnonzero(tokens[:-1] == tokens[-1])
    width = 1
    # While there are many, drop those that disagree one token further back, all at once.
    while ends.size > FEW and width < max_extent:
        earlier = ends - width
        agree = earlier >= 0
        agree[agree] = tokens[earlier[agree]] == tokens[n_ctx - 1 - width]
        if not agree.any():
            return int(ends[-1]) + 1, width  # all agree this far and no further: the latest
        ends = ends[agree]
        width += 1
    best, found = 0, -1
    # Slices of a list or tuple compare as a whole (an array's would compare per element).
    text = context if isinstance(context, (list, tuple)) else tokens.tolist()
    # The few left are measured one by one: a copy that has run for forty tokens takes a few
    # slice comparisons rather than forty array steps (this runs every round).
    for end in ends.tolist():
        extent = agreement(text, end, text, width, min(max_extent, end + 1))
        if extent >= best:  # ascending positions: the latest of the longest
            best, found = extent, end
    return (found + 1, best) if found >= 0 else (-1, 0)


def agreement(source: Sequence[int], end: int, text: Sequence[int], known: int, cap: int) -> int:
    """How many tokens (at most `cap`, at least `known`, which agree already) agree backwards
    from `end` in `source` with the ending of `text` (a list or tuple, `source` too):
    agreement over w tokens implies it over fewer, so a bisection of slice comparisons finds
    it."""
    low, high = known, cap
    last = len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if source[end - mid + 1 : end + 1] == text[last - mid : last]:
            low = mid
        else:
            high = mid - 1
    return low


def locate_in(document: np.ndarray, text: Sequence[int], max_extent: int) -> tuple[int, int]:
    """Where `text`'s ending occurs in `document`: (position of the token that follows it
    there, how far back it agrees, at most `max_extent`), or (-1, 0).

    The occurrence that agrees furthest back wins; among equal ones the earliest, since an
    answer that copies runs through its source from the top.
    """
    if len(text) < 1 or document.size < 2:
        return -1, 0
    ends = np.flatnonzero(document[:-1] == text[-1])
    width = 1
    limit = min(max_extent, len(text))
    # While there are many, drop those that disagree one token further back, all at once.
    while ends.size > FEW and width < limit:
        earlier = ends - width
        agree = earlier >= 0
        agree[agree] = document[earlier[agree]] == text[len(text) - 1 - width]
        if not agree.any():
            return int(ends[0]) + 1, width
        ends = ends[agree]
        width += 1
    best, found = 0, -1
    tail = list(text[-limit:])
    listed = document.tolist() if ends.size else []
    for end in ends.tolist():
        extent = agreement(listed, end, tail, width, min(limit, end + 1))
        if extent > best:
            best, found = extent, end
    return (found + 1, best) if found >= 0 else (-1, 0)
