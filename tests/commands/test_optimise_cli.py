"""`specchat models optimise ID` end to end, in a real process, on a tiny catalog pair."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specchat.tinymodels import TinyModels

CATALOG = """schema = 1

[[pair]]
id = "tiny"
name = "Tiny pair"

[pair.target]
repo = "specchat-tests/tiny-GGUF"
file = "tiny-target.gguf"

[pair.draft]
repo = "specchat-tests/tiny-GGUF"
file = "tiny-draft-close.gguf"
"""


@pytest.fixture
def env(tmp_path: Path, tiny_models: TinyModels) -> dict[str, str]:
    """A home whose user catalog has pair "tiny", both files already in the models folder."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    (home / "config").mkdir(parents=True)
    (home / "config" / "models.toml").write_text(CATALOG, encoding="utf-8")
    (cache / "models").mkdir(parents=True)
    for path in (tiny_models.target, tiny_models.draft_close):
        shutil.copy(path, cache / "models" / path.name)
    return dict(
        os.environ,
        SPECCHAT_HOME=str(home),
        SPECCHAT_MODEL_CACHE=str(cache),
        HF_HUB_CACHE=str(tmp_path / "hub"),
        HF_HUB_OFFLINE="1",
    )


def specchat(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specchat", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_optimise_converts_measures_and_stores(env: dict[str, str]) -> None:
    done = specchat(env, "models", "optimise", "tiny")
    assert done.returncode == 0, done.stderr
    models = Path(env["SPECCHAT_MODEL_CACHE"]) / "models"
    derived = models / "tiny-target.derived-q4_0.gguf"
    stored = models / "tiny-target.derived-q4_0.quality.json"
    assert derived.is_file() and stored.is_file()
    assert not list(models.glob("*.partial"))
    assert "100%" in done.stderr  # the progress line reached the end
    assert "next-token agreement with F32" in done.stdout
    assert "mean KL divergence" in done.stdout
    assert "Q4_0: batched rows identical" in done.stdout or "Q4_0: batched rows differ" in (
        done.stdout
    )
    report = json.loads(stored.read_text(encoding="utf-8"))
    made = derived.stat().st_mtime_ns
    assert report["derived"] == derived.name and report["tokens"] > 100
    # A second run finds the copy and its measurement instead of converting again.
    again = specchat(env, "models", "optimise", "tiny")
    assert again.returncode == 0, again.stderr
    assert "already optimised" in again.stdout and "agreement" in again.stdout
    assert derived.stat().st_mtime_ns == made


def test_optimise_a_missing_pair_or_file_says_what_to_do(env: dict[str, str]) -> None:
    models = Path(env["SPECCHAT_MODEL_CACHE"]) / "models"
    (models / "tiny-target.gguf").unlink()
    done = specchat(env, "models", "optimise", "tiny")
    assert done.returncode == 2
    assert "specchat models fetch tiny" in done.stderr and "Traceback" not in done.stderr
    unknown = specchat(env, "models", "optimise", "nope")
    assert unknown.returncode == 2 and "unknown model pair" in unknown.stderr


def test_optimise_a_corrupt_file_is_a_message_not_a_traceback(
    env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    done = specchat(env, "models", "optimise", str(bad), "--no-quality")
    assert done.returncode == 2
    assert "not a usable GGUF file" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_cancels_cleanly(env: dict[str, str], tmp_path: Path) -> None:
    # Big enough (~80 MB of float32) that the conversion is still running when Ctrl-C comes.
    from specchat.tinymodels import TinySpec, write_tiny_model

    source = write_tiny_model(
        tmp_path / "wide.gguf", TinySpec(n_embd=512, n_head=8, n_ff=1536, n_layer=6)
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "specchat", "models", "optimise", str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # ...which gets Ctrl-C (a suite started in the background inherits it ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stderr is not None
    for line in process.stderr:
        if "convert" in line:
            break
    # A terminal sends Ctrl-C to the whole group: the command and its converter child.
    os.killpg(process.pid, signal.SIGINT)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "conversion cancelled; no partial file was kept" in err
    assert "Traceback" not in err
    models = Path(env["SPECCHAT_MODEL_CACHE"]) / "models"
    assert not list(models.glob("wide*")), "a partial or finished copy was left"
