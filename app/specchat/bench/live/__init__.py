"""The bench's timed runs: every mode on every prompt on the loaded pair (runner.py, with
what a run measured in records.py and multi-turn sessions in sessions.py), the machine's
physical costs, the first answer after a load, the suffix index's cost, the KV caches' batch
noise and a converted file's quality, targets side by side, and what each answer's drafters
proposed at every position (trace.py, which the replay reads) with lookup's ceiling."""
