"""The report's peers section: per prompt and per set, each peer's decode speed, its
speed-up over llama-server's plain decoding, what it drafted and kept, and whether its
answer is SpecChat plain's; SpecChat's own plain and auto beside them."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.bench.live.records import RunRecord
from specchat.bench.peers.configs import DRAFT_SIMPLE_PREFIX, SERVER_PLAIN
from specchat.bench.peers.run import PeerRecord
from specchat.engine.types import StopReason

#: SpecChat's modes shown beside the peers, as the table names them.
SPECCHAT_MODES = {"plain": "SpecChat plain", "auto": "SpecChat auto"}
#: How a bench record names an answer its model ended (RunRecord.stop).
END_OF_ANSWER = StopReason.EOS.name.lower()


def _geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def specchat_rows(records: Sequence[RunRecord]) -> list[PeerRecord]:
    """SpecChat's plain and auto runs at T = 0 (first turns) as peer rows."""
    rows = []
    for r in records:
        if r.temperature != 0 or r.turn or r.variant.mode not in SPECCHAT_MODES:
            continue
        rows.append(
            PeerRecord(
                SPECCHAT_MODES[r.variant.mode],
                r.prompt,
                r.category,
                r.repeat,
                tokens=len(r.tokens),
                tok_s=_counted_as_peers_count(r),
                drafted=r.drafted,
                accepted=r.accepted,
                text=r.text,
                prompt_tokens=r.prompt_tokens,
                token_ids=r.tokens,
            )
        )
    return rows


def _counted_as_peers_count(record: RunRecord) -> float:
    """Decode tokens/s as llama-server counts an answer: its end-of-generation token too,
    whose pass the run's time holds (SpecChat's own figures leave it out, as its floor does)."""
    if record.elapsed_s <= 0:
        return 0.0
    return (len(record.tokens) + (record.stop == END_OF_ANSWER)) / record.elapsed_s


def same_answer(a: PeerRecord, b: PeerRecord) -> bool:
    """By tokens where both have them, else by text."""
    if a.token_ids and b.token_ids:
        return a.token_ids == b.token_ids
    return a.text == b.text


def best_n_max(per_set: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The draft-simple peer with a chosen n-max whose set geometric mean is best."""
    tried = {
        name: row["speedup"]
        for name, row in per_set.items()
        if name.startswith(DRAFT_SIMPLE_PREFIX) and row["speedup"]
    }
    return max(tried, key=lambda n: tried[n]) if tried else None


@dataclass(frozen=True)
class PeersOutcome:
    """The peers' run, as the bench's outcome holds it (bench/live/runner.py's PeersRun).

    Attributes:
        settings: the servers' settings and each peer's arguments, as the report shows them.
        records: every peer's answer to every prompt.
    """

    settings: Mapping[str, Any]
    records: tuple[PeerRecord, ...]

    def section(self, specchat: Sequence[RunRecord]) -> dict[str, Any]:
        """The report's peers section, SpecChat's own plain and auto runs among the peers."""
        return peers_section(self.records, specchat_rows(specchat), self.settings)


def peers_section(
    peers: Sequence[PeerRecord], specchat: Sequence[PeerRecord], settings: Mapping[str, Any]
) -> dict[str, Any]:
    """The report.json section: `rows` per prompt and peer, `set` per peer."""
    everyone = [*specchat, *peers]
    base = {(r.prompt, r.repeat): r.tok_s for r in everyone if r.peer == SERVER_PLAIN and r.tok_s}
    plain = {r.prompt: r for r in specchat if r.peer == "SpecChat plain" and not r.repeat}
    grouped: dict[tuple[str, str], list[PeerRecord]] = defaultdict(list)
    for r in everyone:
        grouped[(r.peer, r.prompt)].append(r)
    rows: list[dict[str, Any]] = []
    for (peer, prompt), runs in grouped.items():
        ok = [r for r in runs if not r.error]
        ratios = [r.tok_s / base[(r.prompt, r.repeat)] for r in ok if (r.prompt, r.repeat) in base]
        equal = [same_answer(r, plain[prompt]) for r in ok if prompt in plain]
        rows.append(
            {
                "peer": peer,
                "prompt": prompt,
                "category": runs[0].category,
                "tok_s": round(_geomean([r.tok_s for r in ok]), 3) or None,
                "speedup": round(_geomean(ratios), 4) if ratios else None,
                "drafted": sum(r.drafted for r in ok),
                "accepted": sum(r.accepted for r in ok),
                "equal_to_specchat_plain": all(equal) if equal else None,
                "prompt_tokens": ok[0].prompt_tokens if ok else None,
                "error": next((r.error for r in runs if r.error), ""),
            }
        )
    per_set: dict[str, dict[str, Any]] = {}
    for peer in dict.fromkeys(r.peer for r in everyone):
        mine = [row for row in rows if row["peer"] == peer]
        speedups = {row["prompt"]: row["speedup"] for row in mine if row["speedup"]}
        worst = min(speedups, key=lambda p: speedups[p]) if speedups else None
        equal = [row["equal_to_specchat_plain"] for row in mine]
        per_set[peer] = {
            "tok_s": round(_geomean([row["tok_s"] or 0.0 for row in mine]), 3) or None,
            "speedup": round(_geomean(list(speedups.values())), 4) if speedups else None,
            "worst_prompt": worst,
            "worst_speedup": speedups.get(worst) if worst else None,
            "drafted": sum(row["drafted"] for row in mine),
            "accepted": sum(row["accepted"] for row in mine),
            "equal": sum(1 for e in equal if e),
            "compared": sum(1 for e in equal if e is not None),
            "errors": sum(1 for row in mine if row["error"]),
        }
    return {
        "settings": dict(settings),
        "best_draft_simple": best_n_max(per_set),
        "set": per_set,
        "rows": rows,
        "records": [r.to_json() for r in peers],
    }


def _drafts(peer: str, drafted: int, accepted: int) -> str:
    # llama-cpp-python does not say what its prompt lookup drafted.
    return "–" if peer.startswith("llama-cpp-python") else f"{drafted} / {accepted}"


def _cell(value: float | None, fmt: str, unit: str = "") -> str:
    return "–" if value is None else format(value, fmt) + unit


def render_peers(section: Mapping[str, Any] | None) -> list[str]:
    """The report.md part: the set's table, then every prompt's."""
    if not section:
        return []
    settings = section["settings"]
    best = section["best_draft_simple"]
    lines = [
        "",
        "## Peers: llama-server and llama-cpp-python, same run, T = 0",
        "",
        f"Same model files, prompts, {settings.get('threads')} threads, context "
        f"{settings.get('ctx')}, `{settings.get('key_type')}` keys; each llama-server "
        "and `specchat serve` fresh for each pass over the set (started on 127.0.0.1, one "
        "slot, its start-up and prompt reading untimed), asked through its OpenAI chat "
        "endpoint with the same chat; llama-cpp-python's `Llama.generate` on SpecChat's "
        "prompt tokens. The peers of a pass run side by side, as many at once as memory "
        "holds: each prompt is answered by every peer in turn, the order turning from prompt "
        "to prompt. SpecChat plain and auto are the bench's own runs, timed before the "
        "peers'; SpecChat serve plain and auto are timed beside them, as a fresh server's "
        "first requests. Decode "
        "tokens/s: one pass a token (llama-server's first token comes from the prompt's "
        "pass, which its `timings` count as prompt reading). Speed-up: over llama-server "
        "plain on the same prompt and pass (geometric mean over passes, then over prompts).",
        "",
    ]
    if settings.get("server"):
        lines += [f"llama-server: `{settings['server']}`", ""]
    if best:
        lines += [
            f"Best draft-simple n-max for this set: **{best[len(DRAFT_SIMPLE_PREFIX) :]}** "
            "(of 2, 4 and 8, chosen knowing these results).",
            "",
        ]
    lines += [
        "| peer | tok/s | × llama-server plain | worst prompt | drafted / kept "
        "| answers = SpecChat plain |",
        "|---|---|---|---|---|---|",
    ]
    for peer, row in section["set"].items():
        name = f"**{peer}**" if peer == best or peer.startswith("SpecChat") else peer
        worst = f"{row['worst_prompt']} {row['worst_speedup']:.3f}×" if row["worst_prompt"] else "–"
        equal = f"{row['equal']}/{row['compared']}" if row["compared"] else "–"
        if row["errors"]:
            equal += f" ({row['errors']} failed)"
        lines.append(
            f"| {name} | {_cell(row['tok_s'], '.1f')} | {_cell(row['speedup'], '.3f', '×')} "
            f"| {worst} | {_drafts(peer, row['drafted'], row['accepted'])} | {equal} |"
        )
    lines += [
        "",
        "Per prompt:",
        "",
        "| prompt | peer | tok/s | × llama-server plain | drafted / kept "
        "| = SpecChat plain | prompt tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in sorted(section["rows"], key=lambda r: r["prompt"]):
        equal = {True: "yes", False: "**no**", None: "–"}[row["equal_to_specchat_plain"]]
        if row["error"]:
            equal = f"failed: {row['error'][:80]}"
        drafts = _drafts(row["peer"], row["drafted"], row["accepted"])
        lines.append(
            f"| {row['prompt']} | {row['peer']} | {_cell(row['tok_s'], '.1f')} "
            f"| {_cell(row['speedup'], '.3f', '×')} | {drafts} "
            f"| {equal} | {_cell(row['prompt_tokens'], 'd')} |"
        )
    return [*lines, ""]


def summary_lines(section: Mapping[str, Any] | None) -> list[str]:
    """One console line a peer: its tokens/s and speed-up over llama-server plain."""
    if not section:
        return []
    lines = ["peers, T = 0 (decode tok/s; × llama-server plain, geometric mean over prompts):"]
    for peer, row in section["set"].items():
        best = " (best n-max for this set)" if peer == section["best_draft_simple"] else ""
        failed = f", {row['errors']} failed" if row["errors"] else ""
        lines.append(
            f"  {peer:38} {_cell(row['tok_s'], '8.1f')} tok/s "
            f"{_cell(row['speedup'], '.3f', '×')}{best}{failed}"
        )
    return lines
