"""Records the replay tests' traces: the default pair's plain T=0 answers with every drafter's
proposals, in rounds.jsonl form (tests/bench/data/default-pair-rounds.jsonl).

At temperature 0 an answer and its proposals are the same on any machine, so the replay tests
price these records under other machines' cost tables. `specchat bench` writes the same
records for every prompt; this tool records a few prompts, one line as each is done:

    PYTHONPATH=app python tools/record_replay_traces.py [PROMPT_ID ...]
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
    from specchat.bench.prompts import load_prompts
    from specchat.bench.trace import record_trace
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_template import ChatMessage
    from specchat.engine.types import Controls, GenerationRequest, SamplingParams
    from specchat.models.download import fetch_pair

    wanted = argv or list(PROMPTS)
    files = fetch_pair("default", source="mirror")
    engine = ChatEngine.load(files.target, files.draft, n_ctx=2048)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FIXTURE.open("w", encoding="utf-8") as out:
            for prompt in load_prompts():
                if prompt.id not in wanted:
                    continue
                messages = [ChatMessage(m["role"], m["content"]) for m in prompt.messages()]
                tokens = engine.prepare(messages, max_tokens=MAX_TOKENS).tokens
                plain = Controls("plain", 0, SamplingParams())
                request = GenerationRequest(tokens, MAX_TOKENS, plain)
                events = [e for result in engine.generate(request) for e in result.events]
                answer = [e.token for e in events]
                trace = record_trace(
                    prompt.id,
                    tokens,
                    answer,
                    draft_model=engine.draft,
                    margins=[e.margin for e in events],
                )
                out.write(json.dumps(trace.to_json()) + "\n")
                out.flush()
                print(f"{prompt.id}: {len(answer)} tokens", flush=True)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
