"""SpecChat's own time per plain round: the round's CPU time outside llama_decode.

Run from a checkout (PYTHONPATH=app). Loads a pair, answers one bench prompt in plain mode
at T = 0 and prints, per round, the main thread's CPU time outside llama_decode (Python,
sampling, bookkeeping) as the median and 90th percentile, beside the median llama_decode time.
CPU time, not wall time: on a machine shared with other work a round's wall time also holds
the time slices others took, which no change here can win back. The answer's token ids go to
--out, to check that a change left them alone.

    PYTHONPATH=app .venv/bin/python tools/measure_plain_overhead.py --tokens 128
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import llama_cpp

from specchat.engine.costs.store import CostStore
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest

MODELS = Path.home() / ".cache/specchat/models"
PROMPTS = Path(__file__).resolve().parent.parent / "app/specchat/bench/prompts.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=str(MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    parser.add_argument("--draft", default=str(MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
    parser.add_argument("--prompt", default="edit-rename", help="a prompt id of the bench set")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, help="write the answer's token ids here")
    args = parser.parse_args()

    decode = llama_cpp.llama_decode
    inside = [0.0, 0.0]  # CPU, wall seconds inside llama_decode this round

    def timed_decode(ctx: object, batch: object) -> int:
        cpu, wall = time.thread_time(), time.perf_counter()
        status: int = decode(ctx, batch)
        inside[0] += time.thread_time() - cpu
        inside[1] += time.perf_counter() - wall
        return status

    llama_cpp.llama_decode = timed_decode  # the model module calls it through llama_cpp
    engine = ChatEngine.load(
        args.target, args.draft, n_ctx=4096, cost_store=CostStore(Path(tempfile.mkdtemp()))
    )
    rows = [json.loads(line) for line in PROMPTS.read_text().splitlines() if line.strip()]
    row = next(r for r in rows if r["id"] == args.prompt)
    messages = [ChatMessage("system", row["system"]), ChatMessage("user", row["user"])]
    prepared = engine.prepare(messages, max_tokens=args.tokens)
    request = GenerationRequest(
        prepared.tokens, max_tokens=args.tokens, controls=Controls(mode="plain")
    )
    generation = engine.generate(request)
    own: list[float] = []
    passes: list[float] = []
    tokens: list[int] = []
    first = True
    while True:
        inside[0] = inside[1] = 0.0
        began = time.thread_time()
        try:
            result = next(generation)
        except StopIteration:
            break
        spent = time.thread_time() - began
        if not first and result.rows:  # the first round also reads the prompt's end
            own.append((spent - inside[0]) * 1000)
            passes.append(inside[1] * 1000)
        first = False
        tokens += [e.token for e in result.events]
        if result.stop is not None:
            break
    engine.close()
    own.sort()
    passes.sort()
    median, p90 = own[len(own) // 2], own[len(own) * 9 // 10]
    print(
        f"{len(own)} plain rounds: own CPU time median {median:.3f} ms, p90 {p90:.3f} ms; "
        f"llama_decode median {passes[len(passes) // 2]:.1f} ms"
    )
    if args.out:
        args.out.write_text(json.dumps(tokens))


if __name__ == "__main__":
    main()
