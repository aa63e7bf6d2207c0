"""Time what a draft head costs against a target pass on this CPU, on the synthetic models
with real proportions that tools/write_proportional_models.py writes.

Usage:
    python tools/measure_head_costs.py [TARGET.gguf] [--assistant FILE] [--threads 2]
                                       [--reps 7] [--context 100] [--rows 8] [--max-k 4]

TARGET defaults to ~/.cache/specchat/synthetic/qwen35-0.8b-mtp-Q4_K_M.gguf. A Qwen3.5
target drafts with its own MTP layer (loaded with load_mtp); a Gemma 4 target with the
assistant beside it (<target>-assistant-Q4_K_M.gguf, or --assistant).

Everything is timed on the same warm model, best of --reps repetitions after one untimed
warm-up, on the CPU with --threads threads:

- a target pass of n rows (n = 1..--rows, logits for every row, as a verify pass asks),
  decoded after --context cached tokens and rolled back after each repetition; first the
  target alone, then with its head following it (an MTP head is fed every pass's rows, which
  the app counts in the pass);
- one draft of k tokens, `DraftHead.draft(last, k)` for k = 1..--max-k, given per token;
- for a hybrid target, the checkpoint round trip (`LlamaModel.checkpoint_round_trip()`,
  saving and restoring the recurrent state) of the target loaded with snapshot_depth=0.

It prints each time in ms and as a multiple of a one-row pass, then the speed-up bound at
acceptance 1 for a draft of K tokens: K + 1 tokens per (K x a drafted token + a pass of K + 1
rows), against one token per one-row pass, with the per-token cost of a K-token draft (of a
--max-k-token draft beyond --max-k).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from specchat.engine.drafting.mtp import load_assistant  # noqa: E402
from specchat.engine.drafting.mtp.mtp_driver import DraftHead  # noqa: E402
from specchat.engine.llamacpp.model import LlamaModel  # noqa: E402
from specchat.engine.llamacpp.recurrent_state import Rollback  # noqa: E402

SYNTHETIC = Path.home() / ".cache" / "specchat" / "synthetic"
DEFAULT_TARGET = SYNTHETIC / "qwen35-0.8b-mtp-Q4_K_M.gguf"


#: Every timing, by the name best_ms was given: (best, median) in ms. A median far above the
#: best tells of another process taking the cores.
TIMES: dict[str, tuple[float, float]] = {}


def best_ms(
    run: Callable[[], object], after: Callable[[], object], reps: int, name: str = ""
) -> float:
    """The least time `run` takes over `reps` repetitions, after one untimed warm-up;
    `after` (untimed) puts things back after each."""
    times = []
    for rep in range(reps + 1):
        began = time.perf_counter()
        run()
        elapsed = (time.perf_counter() - began) * 1000.0
        after()
        if rep:
            times.append(elapsed)
    TIMES[name] = (min(times), float(np.median(times)))
    return min(times)


def text_tokens(model: LlamaModel, count: int, seed: int) -> list[int]:
    """`count` ordinary tokens (no control tokens) drawn at random."""
    rng = np.random.default_rng(seed)
    tokens: list[int] = []
    while len(tokens) < count:
        token = int(rng.integers(0, model.n_vocab))
        if not model.is_eog(token) and model.token_text(token) not in model.special_tokens():
            tokens.append(token)
    return tokens


def time_passes(
    model: LlamaModel, tokens: list[int], context: int, rows: int, reps: int, label: str
) -> dict[int, float]:
    """One-pass times (ms) for 1..rows rows after `context` cached tokens."""
    model.sync(tokens[:context])
    if model.n_past < context:
        model.decode(tokens[model.n_past : context], logits="none")
    times = {}
    for n in range(1, rows + 1):
        batch = tokens[context : context + n]

        def run(batch: list[int] = batch, n: int = n) -> None:
            model.mark(rows=n)
            model.decode(batch, logits="all")

        name = f"target pass, {n} row{'s' * (n > 1)}{label}"
        times[n] = best_ms(run, lambda: model.truncate(context), reps, name)
    return times


def time_drafts(head: DraftHead, last: int, max_k: int, reps: int, short: str) -> dict[int, float]:
    """Per-token times (ms) of a draft of k = 1..max_k tokens."""
    if not head.ready:
        raise RuntimeError(f"the {head.name} is not ready to draft")
    times = {}
    for k in range(1, max_k + 1):
        name = f"{short} draft of {k}, per token"

        def run(k: int = k) -> None:
            head.draft(last, k)

        best_ms(run, lambda: None, reps, name)
        best, median = TIMES[name]
        TIMES[name] = (best / k, median / k)
        times[k] = best / k
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target", type=Path, nargs="?", default=DEFAULT_TARGET)
    parser.add_argument("--assistant", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--context", type=int, default=100)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--max-k", type=int, default=4)
    args = parser.parse_args()

    assistant = args.assistant
    if assistant is None and args.target.name.startswith("gemma4"):
        guess = args.target.with_name(args.target.name.replace("-Q4_K_M", "-assistant-Q4_K_M"))
        assistant = guess if guess.exists() else None

    with LlamaModel(args.target, n_ctx=2048, n_threads=args.threads, load_mtp=True) as model:
        tokens = text_tokens(model, args.context + args.rows, seed=1)
        print(
            f"target {args.target.name}: {args.target.stat().st_size / 2**20:.0f} MiB, "
            f"{model.n_vocab} tokens, {model.info.n_threads} threads, "
            f"rollback {model.rollback.name.lower()}; best of {args.reps}, "
            f"after {args.context} cached tokens"
        )
        passes = time_passes(model, tokens, args.context, args.rows, args.reps, "")

        head = None
        if model.has_mtp:
            head = DraftHead(model)
        elif assistant is not None:
            head = load_assistant(assistant, model)
        drafts: dict[int, float] = {}
        if head is not None:
            short = "MTP head" if model.has_mtp else "assistant"
            label = f", {short} following"
            followed = time_passes(model, tokens, args.context, args.rows, args.reps, label)
            drafts = time_drafts(head, tokens[args.context], args.max_k, args.reps, short)
        else:
            print("no draft head: the target has no MTP layer and no assistant was found")
        recurrent = model.rollback is not Rollback.CACHE

    if recurrent:
        with LlamaModel(args.target, n_ctx=2048, n_threads=args.threads, snapshot_depth=0) as plain:
            plain.decode(tokens[: args.context], logits="none")
            plain.checkpoint_round_trip()  # sizes the checkpoint it names
            name = f"checkpoint round trip ({plain.checkpoint_bytes / 2**20:.1f} MiB)"
            best_ms(plain.checkpoint_round_trip, lambda: None, args.reps, name)

    one = passes[1]
    width = max(len(name) for name in TIMES)
    print(f"\n{'':{width}}  {'best ms':>8}  {'x pass(1)':>9}  {'median ms':>9}")
    for name, (best, median) in TIMES.items():
        print(f"{name:{width}}  {best:8.2f}  {best / one:9.3f}  {median:9.2f}")

    if drafts:
        base = followed
        print(
            f"\nspeed-up bound at acceptance 1 (K + 1 tokens per K drafted tokens + a pass "
            f"of K + 1 rows with the head following, against a one-row pass of {one:.2f} ms)"
        )
        print(f"{'K':>2}  {'draft ms/token':>14}  {'pass(K+1) ms':>12}  {'bound':>6}")
        for k in range(1, args.rows):
            per_token = drafts[min(k, args.max_k)]
            bound = (k + 1) * one / (k * per_token + base[k + 1])
            print(f"{k:>2}  {per_token:14.2f}  {base[k + 1]:12.2f}  {bound:6.2f}")


if __name__ == "__main__":
    main()
