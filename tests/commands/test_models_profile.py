"""`specchat models profile`: the machine's pass costs for a pair, measured once and stored."""

from __future__ import annotations

import json
import os
from pathlib import Path

from specchat import paths
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import MAX_ROWS
from tests.commands.test_models_cli import run_cli, tiny_pair  # noqa: F401  (fixture)


def test_profile_measures_once_then_reads_the_stored_table(
    tiny_pair: str,  # noqa: F811
    tmp_path: Path,
    capsys,  # type: ignore[no-untyped-def]
) -> None:
    assert run_cli("profile", tiny_pair) == 2
    assert "run `specchat models fetch tiny`" in capsys.readouterr().err
    assert run_cli("fetch", tiny_pair, "--source", "mirror") == 0
    capsys.readouterr()

    out_file = tmp_path / "tiny-costs.json"
    assert run_cli("profile", tiny_pair, "--out", str(out_file)) == 0
    captured = capsys.readouterr()
    assert "measuring:" in captured.err and "measured in" in captured.err
    lines = [line.split() for line in captured.out.splitlines()]
    sizes = [int(parts[0]) for parts in lines if parts and parts[0].isdigit()]
    assert sizes == list(range(1, MAX_ROWS + 1))
    assert "draft" in captured.out and "a token" in captured.out
    stored = list((paths.cache_dir() / "costs").glob("*.json"))
    assert len(stored) == 2  # the target's table and the draft's
    costs = MachineCosts.read(out_file)
    assert sorted(costs.target.pass_ms) == list(range(1, MAX_ROWS + 1))
    assert costs.draft is not None and costs.draft_token_ms is not None
    # How a pass grows deeper in a chat is measured, printed and written with the table.
    assert "cached tokens (attention over the cache" in captured.out
    assert costs.target.slope_ms is not None

    assert run_cli("profile", tiny_pair) == 0
    captured = capsys.readouterr()
    assert "stored table" in captured.err and "measuring" not in captured.err

    # A rewritten model file is another model: measured again.
    target = Path(paths.models_dir() / "tiny-target.gguf")
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert run_cli("profile", tiny_pair) == 0
    assert "measured in" in capsys.readouterr().err
    json.loads(stored[0].read_text())  # still a whole file
