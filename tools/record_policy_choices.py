"""Records the auto policy's per-round choices over the shipped prompts into a test fixture.

tests/engine/test_policy_choices.py replays the shipped bench prompts (app/specchat/bench/
prompts.jsonl) through the decoder in `auto` mode at temperature 0, with the tiny model pair
and a pinned cost table instead of timings (tests/helpers/policy_choices.py), and compares
every round's (drafter, K) with tests/engine/data/pinned_policy_choices.json. A refactor must
leave that file's contents unchanged. A change that means to alter the policy re-records it:

    PYTHONPATH=app python tools/record_policy_choices.py

and the commit says why the choices moved.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "engine" / "data" / "pinned_policy_choices.json"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.helpers.policy_choices import record_all

    from specchat.tinymodels import build_tiny_set

    with tempfile.TemporaryDirectory() as tmp:
        tiny = build_tiny_set(Path(tmp))
        choices = record_all(tiny.target, tiny.draft_close)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(choices, indent=1) + "\n", encoding="utf-8")
    rounds = sum(len(v) for table in choices.values() for v in table.values())
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {rounds} rounds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
