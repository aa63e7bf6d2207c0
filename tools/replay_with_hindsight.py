"""Replays a trace set with `auto`'s acceptance estimates fitted in hindsight on the very
answers it replays: how much of the gap to the ceiling a better estimate could win.

    PYTHONPATH=app python tools/replay_with_hindsight.py app/specchat/bench/traces/shipped.jsonl \
        --costs gpu --fit draft

`--fit draft`: the draft model's confidence calibration (kept and next-kept rates per
confidence band, counted over every position of the set). `--fit copies`: copy acceptance
(refusal rate per match bucket, regime and position band, counted over every lookup proposal
of the set). Each fitted rate stands in for its prior at a weight of FITTED_WEIGHT, so what
one answer learns online barely moves it. Prints auto, best fixed and the ceiling (geometric
means), and auto's share of the ceiling's gain, beside the same replay with online estimates.

The fitted rates reach the drafters through the replay's one seam for estimates
(`replay(..., estimates=...)`, engine/drafting/base.py's Estimates): every drafter the
replay builds is handed to it before its first round.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.bench.hindsight.replay import ReplayResult
    from specchat.bench.live.trace import AnswerTrace
    from specchat.engine.drafting import Drafter, Estimates
    from specchat.engine.drafting.copies.copy_acceptance import CopyAcceptance
    from specchat.engine.drafting.draft_model.model_acceptance import ConfidenceCalibration

FITTED_WEIGHT = 1000.0
#: Fewer observations than this leave a cell at its prior.
MIN_SEEN = 5


def fit_draft_confidence(
    traces: Sequence[AnswerTrace],
) -> Callable[[ConfidenceCalibration], None]:
    from specchat.engine.costs import priors
    from specchat.engine.drafting.draft_model import model_acceptance as ma

    bands = len(priors.CONFIDENCE_BANDS)
    kept, seen = [0.0] * bands, [0.0] * bands
    next_kept, next_seen = [0.0] * bands, [0.0] * bands
    for trace in traces:
        agrees = [d[0] == a for d, a in zip(trace.draft, trace.answer, strict=True)]
        for j, confidence in enumerate(trace.draft_confidence):
            b = ma.ConfidenceCalibration.band(confidence)
            seen[b] += 1
            kept[b] += agrees[j]
            if agrees[j] and j + 1 < len(agrees):
                next_seen[b] += 1
                next_kept[b] += agrees[j + 1]

    def fitted(calibration: ConfidenceCalibration) -> None:
        for b in range(bands):
            if seen[b] >= MIN_SEEN:
                calibration.kept[b] = FITTED_WEIGHT * kept[b] / seen[b]
                calibration.seen[b] = FITTED_WEIGHT
            if next_seen[b] >= MIN_SEEN:
                calibration.next_kept[b] = FITTED_WEIGHT * next_kept[b] / next_seen[b]
                calibration.next_seen[b] = FITTED_WEIGHT

    return fitted


def fit_copies(traces: Sequence[AnswerTrace]) -> Callable[[CopyAcceptance], None]:
    from specchat.engine.costs import priors
    from specchat.engine.drafting.copies import copy_acceptance as ca
    from specchat.engine.drafting.copies.matching import locate

    n_bands = len(priors.LOOKUP_BANDS)

    counts = {
        (sure, own): [[[0.0, 0.0] for _ in range(n_bands)] for _ in priors.LOOKUP_EXTENTS]
        for sure in (None, True, False)
        for own in (False, True)
    }
    for trace in traces:
        text = list(trace.prompt_tokens)
        for i in range(len(trace.answer)):
            context, text = text, [*text, trace.answer[i]]
            if not trace.lookup_len[i]:
                continue
            margin = trace.margin_before(i)
            # Where the match lies, as the live drafters tell (CopyAcceptance.own).
            start, longest = locate(context)
            own = start - longest >= len(trace.prompt_tokens)
            regime = (None if margin is None else margin >= priors.SURE_MARGIN, own)
            cells = counts[regime][ca.match_bucket(trace.match_len[i])]
            kept = trace.lookup_kept(i)
            offered = min(trace.lookup_len[i], len(trace.answer) - i)
            for position in range(1, min(kept, offered) + 2 if kept < offered else kept + 1):
                cell = cells[bisect.bisect_right(priors.LOOKUP_BANDS, position) - 1]
                cell[1] += 1
                cell[0] += position > kept

    def fitted(acceptance: CopyAcceptance) -> None:
        for regime, estimates in acceptance._survival.items():
            for bucket, estimate in enumerate(estimates):
                for band, (refused, reached) in enumerate(counts[regime][bucket]):
                    if reached >= MIN_SEEN:
                        estimate._prior_refused[band] = FITTED_WEIGHT * refused / reached
                        estimate._prior_reached[band] = FITTED_WEIGHT

    return fitted


def fitted_estimates(
    *,
    draft: Callable[[ConfidenceCalibration], None] | None = None,
    copies: Callable[[CopyAcceptance], None] | None = None,
) -> Estimates:
    """Estimates that start the draft model's confidence calibrations (`draft`) or every
    copying drafter's copy acceptance (`copies`) at rates fitted in hindsight, instead of at
    their priors."""
    from specchat.engine.drafting import DraftModelDrafter, Estimates
    from specchat.engine.drafting.copies.copying import CopyDrafter

    class Fitted(Estimates):
        def start(self, drafter: Drafter) -> None:
            if draft is not None and isinstance(drafter, DraftModelDrafter):
                for calibration in drafter.confidence.values():
                    draft(calibration)
            if copies is not None and isinstance(drafter, CopyDrafter):
                copies(drafter.copies)

    return Fitted()


def summary(results: Sequence[ReplayResult]) -> str:
    from specchat.bench.live.runner import geomean

    auto = geomean([r.speedup for r in results])
    fixed = geomean([r.best_fixed for r in results])
    ceiling = geomean([r.ceiling for r in results])
    share = (auto - 1) / (ceiling - 1) if ceiling > 1 else float("nan")
    worst = min(r.speedup for r in results)
    return (
        f"auto {auto:.3f}×  best fixed {fixed:.3f}×  ceiling {ceiling:.3f}×  "
        f"{share:.1%} of the ceiling's gain  worst {worst:.3f}×"
    )


def main(argv: list[str]) -> int:
    from specchat.bench.hindsight.replay import read_costs, read_traces, replay

    parser = argparse.ArgumentParser()
    parser.add_argument("traces", type=Path)
    parser.add_argument("--costs", default="gpu")
    parser.add_argument("--fit", choices=("draft", "copies"), required=True)
    args = parser.parse_args(argv)
    traces = read_traces(args.traces)
    costs = read_costs(args.costs)
    print(f"online estimates:  {summary(replay(traces, costs))}")
    if args.fit == "draft":
        estimates = fitted_estimates(draft=fit_draft_confidence(traces))
    else:
        estimates = fitted_estimates(copies=fit_copies(traces))
    print(f"fitted in hindsight: {summary(replay(traces, costs, estimates=estimates))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
