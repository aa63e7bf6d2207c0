"""The agent bench: a scripted agent's coding tasks (agent_tasks.py, with their JSON Lines
beside it) run turn by turn through `specchat serve` (agent_loop.py), plain and auto side by
side (agent_bench.py), and its report (agent_report.py)."""
