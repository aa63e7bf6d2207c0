"""Step: a pair's cost tables measured fully offloaded, written as a SpecChat cost file."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from typing import Any

from gpu_check import child
from gpu_check.pairs import PAIRS, Pair, model_file

#: Target rows measured: every size the policy prices, or (--small) the first few.
ROWS, SMALL_ROWS = 64, 8
#: Context of the measured models: room for the slope's passes 2,048 tokens deeper.
N_CTX, SMALL_N_CTX = 4096, 1024


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    from specchat.engine.costs.machine import MachineCosts
    from specchat.engine.costs.profiling import PairProfiler
    from specchat.engine.costs.store import CostStore, new_head_table, new_table
    from specchat.engine.llamacpp.model import LlamaModel

    pair = next(p for p in PAIRS if p.name == args.pair)
    n_ctx = SMALL_N_CTX if args.small else N_CTX
    opened = dict(n_ctx=n_ctx, n_gpu_layers=args.n_gpu_layers, n_threads=args.threads)
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(
            LlamaModel(
                model_file(args.work, pair.target, small=args.small),
                load_mtp=pair.load_mtp,
                **opened,
            )
        )
        draft = None
        if pair.draft:
            path = model_file(args.work, pair.draft, small=args.small)
            draft = stack.enter_context(LlamaModel(path, **opened))
        heads, files = _heads(pair, target, args)
        for head in heads.values():
            stack.callback(head.close)
        costs = MachineCosts(
            target=new_table(target, rows=SMALL_ROWS if args.small else ROWS),
            draft=None if draft is None else new_table(draft, rows=1),
            heads={name: new_head_table(target, name, file) for name, file in files.items()},
        )
        store = CostStore(args.work / "cost-store")
        # On a shared CPU (--small) other programs' load would postpone the passes: the
        # small run checks the path, not the figures.
        load = (lambda: 0.0) if args.small else None

        def stop() -> bool:
            return deadline.passed(margin=10.0)

        profiler = PairProfiler(costs, target, draft, store=store, load=load)
        complete = profiler.run(should_stop=stop)
        postponed = profiler.postponed
        if heads:
            # A head follows the target's cache from where it is emptied: after the
            # target's slope passes it has no hidden state to draft from until the cache
            # is read again (HeadMeasurer caches filler first).
            target.truncate(0)
            profiler = PairProfiler(costs, target, heads=heads, store=store, load=load)
            complete = profiler.run(should_stop=stop) and complete
            postponed = postponed or profiler.postponed
        info = target.info
        costs.name = (
            f"{os.environ.get('GPU_CHECK_DEVICE', info.backend)}: synthetic {pair.name} "
            f"(random weights, {'tiny' if args.small else 'real'} shapes), {info.backend}, "
            f"{info.gpu_layers} layers offloaded"
        )
        costs.sources = (
            "Measured by packaging/gpu_check (SpecChat's PairProfiler, the tables the app "
            "measures between answers) on files tools/write_proportional_models.py writes.",
            f"Target {target.path.name}; draft {draft.path.name if draft else 'none'}; heads "
            f"{', '.join(files) or 'none'}.",
        )
    path = args.out / f"costs-{pair.name}.json"
    path.write_text(json.dumps(costs.to_json(), indent=1), encoding="utf-8")
    return _summary(
        costs,
        complete=complete,
        postponed=postponed,
        file=path.name,
        backend=info.backend,
        gpu_layers=info.gpu_layers,
    )


def _heads(pair: Pair, target: Any, args: argparse.Namespace) -> tuple[dict[str, Any], dict]:
    """Each head of the pair, loaded beside `target`, and the file its weights come from."""
    from specchat.engine.drafting.mtp import load_assistant
    from specchat.engine.drafting.mtp.mtp_driver import DraftHead

    heads: dict[str, Any] = {}
    files = {}
    for name, file in pair.heads:
        if file:
            path = model_file(args.work, file, small=args.small)
            heads[name] = load_assistant(path, target, n_gpu_layers=args.n_gpu_layers)
        else:
            path = target.path
            heads[name] = DraftHead(target)
        files[name] = path
    return heads, files


def _summary(costs: Any, **facts: Any) -> dict[str, Any]:
    """What the report shows: the target's shape (each size over one token), the draft
    model's and the heads' tokens against a target token, the measured milliseconds."""
    one = costs.target.pass_ms.get(1)
    shape = {str(n): round(ms / one, 3) for n, ms in sorted(costs.target.pass_ms.items())}
    out = {
        **facts,
        "target_ms": round(one, 3) if one else None,
        "shape": shape if one else {},
        "sizes_measured": len(costs.target.pass_ms),
        "slope_ms": costs.target.slope_ms,
        "checkpoint_ms": costs.target.checkpoint_ms,
    }
    if costs.draft is not None and costs.draft.pass_ms.get(1):
        out["draft_ms"] = round(costs.draft.pass_ms[1], 3)
        out["catchup_row_ms"] = costs.draft.catchup_row_ms
    out["heads_ms"] = {
        name: round(table.pass_ms[1], 3)
        for name, table in costs.heads.items()
        if 1 in table.pass_ms
    }
    return out


if __name__ == "__main__":
    parser = child.options(__doc__ or "")
    parser.add_argument("--pair", required=True)
    child.main(__doc__ or "", run, parser)
