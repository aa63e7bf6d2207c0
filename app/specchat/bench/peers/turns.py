"""Which peers are alive together and in what order they answer: side by side, prompt by
prompt, so that what the machine does meanwhile falls on every peer alike."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

#: Memory left free beside the peers started together (the bench's own engine, the system).
MEMORY_RESERVE_BYTES = 1 << 30

T = TypeVar("T")


def available_memory() -> int | None:
    """Bytes the system can hand out without swapping (Linux's MemAvailable, which counts
    reclaimable file pages: peers share the model files' pages); None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def footprint(target: Path, beside: Sequence[Path]) -> int:
    """What one more peer takes at most: its own copy of every file it loads (llama.cpp
    repacks CPU weights into memory of its own; a file it maps alone is shared)."""
    return sum(path.stat().st_size for path in (target, *beside) if path.exists())


def fits(need_bytes: int, free_bytes: int | None) -> bool:
    """Whether one more peer needing `need_bytes` can start beside those alive, with
    MEMORY_RESERVE_BYTES to spare; never where free memory is unknown."""
    return free_bytes is not None and free_bytes >= need_bytes + MEMORY_RESERVE_BYTES


def turn_order(peers: Sequence[T], turn: int) -> list[T]:
    """`peers` turned by `turn` places: the order they answer the `turn`-th prompt in (and
    start in, pass after pass), so no peer always goes first or follows the same one."""
    if not peers:
        return []
    shift = turn % len(peers)
    return [*peers[shift:], *peers[:shift]]
