"""The agent bench's write-back set (files of 100 to 300 lines read and written back
changed) and its tool-call styles: the target's own template, or Qwen3.5's XML-style calls
rendered for the same target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.agent.agent_bench import measure_agents
from specchat.bench.agent.agent_report import build_agent_report, spending_lines
from specchat.bench.agent.agent_styles import speaking, style_label
from specchat.bench.agent.agent_tasks import (
    AGENT_SETS_BY_NAME,
    TOOLS,
    WRITE_BACK_TASKS,
    AgentTask,
    Toolbox,
    load_tasks,
)
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_message import ChatMessage

#: Each task's change, as (file, text replaced, replacement): what a good agent writes.
CHANGES = {
    "rename-class": [("ledger.py", "Ledger", "Journal")],
    "add-method": [
        (
            "shapes.py",
            "    def is_square(self):",
            "    def perimeter(self):\n        return 2 * (self.width + self.height)\n\n"
            "    def is_square(self):",
        )
    ],
    "fix-word-count": [("textstats.py", "return len(text)\n", "return len(words(text))\n")],
    "attached-rename-function": [
        ("grades.py", "def average(", "def average_score("),
        ("grades.py", "return average(", "return average_score("),
    ],
    "attached-add-method": [
        (
            "todo.py",
            "    def show(self):",
            "    def count_done(self):\n        return sum(1 for item in self.items if item.done)"
            "\n\n    def show(self):",
        )
    ],
    "attached-fix-bug": [("units.py", "9 / 5 - 32", "9 / 5 + 32")],
}


@pytest.mark.parametrize("task", load_tasks(WRITE_BACK_TASKS), ids=lambda t: t.id)
def test_each_write_back_task_changes_a_long_file_and_passes_once_changed(
    task: AgentTask, tmp_path: Path
) -> None:
    assert AGENT_SETS_BY_NAME["agent-write-back"] == WRITE_BACK_TASKS
    box = Toolbox(task, tmp_path)
    assert not box.check()[0]
    for name, old, new in CHANGES[task.id]:
        text = box.call("read_file", json.dumps({"path": name}))
        assert 100 <= len(text.splitlines()) <= 300
        box.call("write_file", json.dumps({"path": name, "content": text.replace(old, new)}))
    assert box.call("run_check", "{}").startswith("check passed")


def test_a_file_written_inside_a_code_fence_is_written_without_it(tmp_path: Path) -> None:
    task = load_tasks(WRITE_BACK_TASKS)[-1]
    box = Toolbox(task, tmp_path)
    name, text = task.files[0]
    fixed = text.replace("9 / 5 - 32", "9 / 5 + 32")
    for wrapped in (f"```python\n{fixed}```", f"```\n{fixed}```\n"):
        box.call("write_file", json.dumps({"path": name, "content": wrapped}))
        assert (tmp_path / name).read_text(encoding="utf-8") == fixed
    # A fence inside the text, or text around one, is the file's own.
    inner = f"notes\n```python\n{fixed}```"
    box.call("write_file", json.dumps({"path": name, "content": inner}))
    assert (tmp_path / name).read_text(encoding="utf-8") == inner


def test_the_xml_style_renders_parameters_raw_and_reads_them_back(tools_target: Path) -> None:
    engine = ChatEngine.load(tools_target, None, n_ctx=4096, n_threads=1)
    try:
        own = style_label(engine)
        chat = [ChatMessage("user", "Write a.py")]
        with speaking(engine, "xml") as variables:
            assert variables == {"enable_thinking": False}
            assert style_label(engine) == "Qwen XML" != own
            prompt = engine.prepare(chat, max_tokens=8, tools=list(TOOLS))
            text = engine.template.render(chat, tools=list(TOOLS), extra=variables)
            assert "<parameter=" in text and prompt.tokens
        assert style_label(engine) == own  # its own template again
        with pytest.raises(ValueError, match="no agent style"), speaking(engine, "yaml"):
            pass
    finally:
        engine.close()


def test_the_bench_runs_a_style_and_says_what_each_task_spent(
    tools_target: Path, tmp_path: Path
) -> None:
    engine = ChatEngine.load(tools_target, None, n_ctx=4096, n_threads=1)
    try:
        tasks = load_tasks(WRITE_BACK_TASKS)[:1]
        pairs = measure_agents(engine, tasks, max_tokens=8, max_turns=2, style="xml")
    finally:
        engine.close()
    (pair,) = pairs
    assert pair.same
    report = build_agent_report(
        pairs, info={}, costs={"curve_ms": {}}, set_name="agent-write-back", style="xml"
    )
    spent = report["tasks"][0]["spent"]
    assert spent["plain"]["turns"] == len(pair.plain.turns)
    assert spent["auto"]["tokens"] == sum(t.tokens for t in pair.auto.turns)
    assert report["overall"]["tasks_passed"] == {"plain": 0, "auto": 0}  # tiny nonsense
    lines = spending_lines(report)
    assert lines[0].startswith("rename-class") and "tasks passed (xml)" in lines[-1]
