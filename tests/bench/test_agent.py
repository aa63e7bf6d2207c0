"""The agent bench: its tasks (each check fails as shipped and passes once fixed), the tools
the bench answers locally, the scripted agent's loop through a real server on the tiny
models, and `specchat bench --prompts agent` end to end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.bench.agent.agent_bench import measure_agents
from specchat.bench.agent.agent_loop import run_task
from specchat.bench.agent.agent_report import build_agent_report, summary_lines, write_agent_report
from specchat.bench.agent.agent_tasks import AGENT_SETS, AgentTask, Toolbox, load_tasks
from specchat.bench.prompts import PromptFileError
from specchat.cli import main
from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.engine.session import ChatEngine
from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import running_server

#: Each task's fix, as (file, text replaced, replacement): what a good agent would write.
FIXES = {
    "fix-subtract": [("calc.py", "# a minus b\n    return a + b", "# a minus b\n    return a - b")],
    "rename-total": [
        ("shop.py", "def total(", "def subtotal("),
        ("report.py", "total", "subtotal"),
    ],
    "add-word-count": [
        (
            "text_tools.py",
            "# Helpers for short texts.\n",
            "# Helpers for short texts.\n\n\ndef word_count(text):\n    return len(text.split())\n",
        )
    ],
    "fix-last-n": [("seq.py", "items[-n - 1:]", "items[-n:]")],
    "greeting-punctuation": [("greetings.py", '"Hi " + name', 'f"Hello, {name}!"')],
}


def _all_tasks() -> list[AgentTask]:
    return [task for path in AGENT_SETS.values() for task in load_tasks(path)]


@pytest.mark.parametrize("task", _all_tasks(), ids=lambda t: t.id)
def test_each_tasks_check_fails_as_shipped_and_passes_once_fixed(
    task: AgentTask, tmp_path: Path
) -> None:
    box = Toolbox(task, tmp_path)
    passed, said = box.check()
    assert not passed and "check failed" in said
    for name, old, new in FIXES[task.id]:
        text = box.call("read_file", json.dumps({"path": name}))
        assert old in text
        written = box.call(
            "write_file", json.dumps({"path": name, "content": text.replace(old, new)})
        )
        assert written.startswith("wrote ")
    assert box.call("run_check", "{}").startswith("check passed")


def test_the_held_back_set_is_apart_from_the_tuning_set() -> None:
    tuning, held = (load_tasks(path) for path in AGENT_SETS.values())
    assert tuning and held
    assert not {t.id for t in tuning} & {t.id for t in held}
    assert not {t.instruction for t in tuning} & {t.instruction for t in held}


@pytest.fixture
def box(tmp_path: Path) -> Toolbox:
    return Toolbox(load_tasks(AGENT_SETS["agent"])[0], tmp_path / "repo")


def test_the_tools_list_read_and_write_inside_the_repository_only(box: Toolbox) -> None:
    assert box.call("list_files", "{}").split("\n") == ["calc.py", "check.py"]
    assert box.call("list_files", "") == box.call("list_files", "{}")
    assert "def subtract" in box.call("read_file", '{"path": "./calc.py"}')
    assert box.call("write_file", '{"path": "notes/todo.txt", "content": "fix it"}') == (
        "wrote 6 bytes to notes/todo.txt"
    )
    assert "notes/todo.txt" in box.call("list_files", "{}")
    for outside in ("../escape.py", "/etc/passwd", "notes/../../x"):
        said = box.call("write_file", json.dumps({"path": outside, "content": "x"}))
        assert said.startswith("error:") and "outside the repository" in said
        assert box.call("read_file", json.dumps({"path": outside})).startswith("error:")
    assert not (box.root.parent / "escape.py").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("read_file", '{"path": "calc.py"', "not valid JSON"),
        ("read_file", "[1]", "must be a JSON object"),
        ("read_file", '{"path": "missing.py"}', "No such file"),
        ("read_file", "{}", "'path' must name a file"),
        ("write_file", '{"path": "check.py", "content": "print(1)"}', "may not be changed"),
        ("write_file", '{"path": "calc.py"}', "'content' must be"),
        ("delete_file", '{"path": "calc.py"}', "there is no tool 'delete_file'"),
    ],
)
def test_a_bad_call_gets_an_error_the_model_can_read(
    box: Toolbox, name: str, arguments: str, problem: str
) -> None:
    said = box.call(name, arguments)
    assert said.startswith("error:") and problem in said
    assert "return a + b" in box.call("read_file", '{"path": "calc.py"}')


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{", "not valid JSON"),
        ('{"id": "a", "instruction": "b", "files": {}}', "a task is an object of"),
        ('{"id": "a", "instruction": "b", "files": {"x.py": 1}, "check": "x.py"}', "map paths"),
        ('{"id": "a", "instruction": "b", "files": {"x.py": ""}, "check": "y.py"}', "not among"),
        ('{"id": " ", "instruction": "b", "files": {"x.py": ""}, "check": "x.py"}', "'id' must"),
    ],
)
def test_a_bad_task_file_names_its_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(PromptFileError, match=problem) as caught:
        load_tasks(path)
    assert f"{path}:1" in str(caught.value)


@pytest.fixture(scope="module")
def agent_server(tools_target: Path, tiny_models: TinyModels) -> Iterator[ApiServer]:
    with running_server(
        tools_target, tiny_models.draft_close, n_ctx=4096, prefixes=PrefixCache()
    ) as server:
        yield server


def test_the_agent_runs_the_calls_and_sends_each_turn_the_whole_history(
    agent_server: ApiServer, tmp_path: Path
) -> None:
    """The tiny model writes nonsense: made to call list_files every turn, its arguments are
    no JSON, the toolbox says so, and the loop goes on with that result to its last turn."""
    assert agent_server.address is not None
    task = load_tasks(AGENT_SETS["agent"])[0]
    named = {"type": "function", "function": {"name": "list_files"}}
    run = run_task(
        agent_server.address.host,
        agent_server.address.port,
        task,
        tmp_path / "repo",
        mode="auto",
        max_tokens=6,
        max_turns=3,
        tool_choice=named,
    )
    assert (run.task, run.mode, run.passed) == (task.id, "auto", False)
    assert len(run.turns) == 3
    assert all([c.name for c in t.calls] == ["list_files"] for t in run.turns)
    first, *later = run.turns
    assert first.evaluated == first.prompt_tokens  # a fresh prompt
    for before, turn in zip(run.turns, later, strict=False):
        # The whole history again, and more: only what is new is evaluated.
        assert turn.prompt_tokens > before.prompt_tokens + before.tokens
        assert turn.evaluated < turn.prompt_tokens - before.prompt_tokens // 2
    assert all(t.first_token_s > 0 and t.decode_ms > 0 for t in run.turns)


def test_both_modes_start_alike_and_say_the_same_at_t0(tools_target: Path, tmp_path: Path) -> None:
    engine = ChatEngine.load(tools_target, None, n_ctx=4096, n_threads=1)
    try:
        tasks = load_tasks(AGENT_SETS["agent-held-back"])
        pairs = measure_agents(engine, tasks, max_tokens=8, max_turns=2)
    finally:
        engine.close()
    assert [p.task for p in pairs] == [t.id for t in tasks]
    for pair in pairs:
        assert pair.same
        assert pair.plain.mode == "plain" and pair.auto.mode == "auto"
        # Each run starts from empty caches: its first prompt is read whole.
        for run in (pair.plain, pair.auto):
            assert run.turns[0].evaluated == run.turns[0].prompt_tokens
    report = build_agent_report(
        pairs, info={"target": "tiny"}, costs={"curve_ms": {"1": 1.0}}, set_name="agent-held-back"
    )
    assert report["overall"]["all_same_answers"]
    assert [t["task"] for t in report["tasks"]] == [t.id for t in tasks]
    row = report["tasks"][0]["turns"][0]
    assert set(row["evaluated"]) == {"plain", "auto"} and "decode_speed_up" in row
    lines = summary_lines(report)
    # a line a turn, one a task, the totals, and what was written inside tool calls
    assert len(lines) == sum(len(t["turns"]) + 1 for t in report["tasks"]) + 2
    in_calls = report["overall"]["in_calls"]
    assert in_calls["tokens"] == sum(t.call_tokens for p in pairs for t in p.auto.turns) > 0
    assert lines[-1].startswith(f"inside tool calls (auto): {in_calls['tokens']} tokens written")
    path = write_agent_report(report, tmp_path / "out")
    assert "fix-last-n" in path.read_text(encoding="utf-8")
    assert json.loads((tmp_path / "out" / "agent.json").read_text(encoding="utf-8")) == report


def test_specchat_bench_prompts_agent_end_to_end(
    tools_target: Path,
    tiny_models: TinyModels,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    argv = ["bench", "--target", str(tools_target), "--draft", str(tiny_models.draft_close)]
    argv += ["--prompts", "agent", "--max-tokens", "8", "--agent-turns", "2", "--threads", "1"]
    argv += ["--no-physical", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "agent.json").read_text(encoding="utf-8"))
    assert [t["task"] for t in report["tasks"]] == [t.id for t in load_tasks(AGENT_SETS["agent"])]
    assert report["cpu"]["model"] is not None and isinstance(report["cpu"]["flags"], list)
    assert set(report["costs"]["curve_ms"]) == {"1", "2", "4", "8", "16", "32", "64"}
    assert "fix-subtract" in printed and "all turns: decode plain" in printed
    assert (out / "agent.md").exists()


def test_the_agent_sets_refuse_what_they_cannot_do(
    tools_target: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["bench", "--target", str(tools_target), "--out", str(tmp_path), "--prompts", "agent"]
    for extra, said in ((["--via-api"], "through the API"), (["--agent-turns", "0"], "at least 1")):
        assert main([*base, *extra]) == 2
        assert said in capsys.readouterr().err
