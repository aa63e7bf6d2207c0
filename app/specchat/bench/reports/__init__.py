"""The bench's report: report.json, report.md, report.png and rounds.jsonl (report.py), from
the comparisons with plain (compare.py), the multi-turn and first-token sections and the
replay of the bench's own answers (replay_report.py)."""
