"""The prompt file parser: the shipped set loads, malformed lines are refused by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.prompts import (
    DEFAULT_CATEGORY,
    EVERYDAY_PROMPTS,
    SHIPPED_PROMPTS,
    PromptFileError,
    load_prompts,
    parse_prompts,
    prompt_file,
)


def test_shipped_set_covers_every_category() -> None:
    prompts = load_prompts()
    categories = {p.category for p in prompts}
    assert {"code-writing", "code-editing", "extraction", "explanation", "creative"} <= categories
    assert len({p.id for p in prompts}) == len(prompts)
    assert SHIPPED_PROMPTS.name == "prompts.jsonl"


def test_everyday_set_is_thirty_single_turns_apart_from_the_shipped_ones() -> None:
    everyday = load_prompts(prompt_file("everyday"))
    assert prompt_file("everyday") == EVERYDAY_PROMPTS and len(everyday) == 30
    assert len({p.id for p in everyday}) == 30
    assert not {p.id for p in everyday} & {p.id for p in load_prompts()}
    assert {"code-writing", "code-editing", "extraction", "explanation", "creative"} <= {
        p.category for p in everyday
    }
    assert all(p.user and not p.turns for p in everyday)
    assert prompt_file("shipped") == SHIPPED_PROMPTS
    assert prompt_file("my/own.jsonl") == Path("my/own.jsonl")


def test_shipped_set_is_package_data() -> None:
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    assert '"bench/*.jsonl"' in pyproject.read_text(encoding="utf-8")


def test_parses_optional_fields_and_skips_blank_lines() -> None:
    text = "\n".join(
        [
            json.dumps({"id": "a", "user": "hi"}),
            "",
            json.dumps({"id": "b", "user": "yo", "system": "be brief", "category": "chat"}),
        ]
    )
    a, b = parse_prompts(text)
    assert (a.category, a.system) == (DEFAULT_CATEGORY, None)
    assert b.messages() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "yo"},
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "2: not valid JSON"),
        ("[1, 2]", "2: expected a JSON object, got list"),
        ('{"id": "b"}', "2: 'user' must be a non-empty string"),
        ('{"id": "", "user": "x"}', "2: 'id' must be a non-empty string"),
        ('{"id": "b", "user": 3}', "2: 'user' must be a non-empty string"),
        ('{"id": "b", "user": "x", "system": 1}', "2: 'system' must be a string"),
        ('{"id": "b", "user": "x", "prompt": "y"}', "2: unknown key(s) prompt"),
        ('{"id": "a", "user": "x"}', "2: duplicate id 'a' (first on line 1)"),
    ],
)
def test_bad_lines_are_refused_with_their_line(line: str, message: str) -> None:
    text = json.dumps({"id": "a", "user": "fine"}) + "\n" + line + "\n"
    with pytest.raises(PromptFileError) as caught:
        parse_prompts(text, source="p.jsonl")
    assert f"p.jsonl:{message}" in str(caught.value)


def test_empty_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PromptFileError, match="no prompts"):
        parse_prompts("\n\n", source="empty.jsonl")
    with pytest.raises(PromptFileError, match="cannot read prompt file"):
        load_prompts(tmp_path / "absent.jsonl")


def test_a_session_runs_its_turns_after_the_answers_before_them() -> None:
    line = {
        "id": "s",
        "system": "be brief",
        "turns": ["write f", "now add a docstring", {"regenerate": True}],
        "history": [[{"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}]],
    }
    [session] = parse_prompts(json.dumps(line))
    assert session.turn_count == 3 and session.user == "write f"
    assert session.history == (
        ({"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}),
    )
    system = {"role": "system", "content": "be brief"}
    assert session.messages() == [system, {"role": "user", "content": "write f"}]
    assert session.messages(["def f(): ..."]) == [
        system,
        {"role": "user", "content": "write f"},
        {"role": "assistant", "content": "def f(): ..."},
        {"role": "user", "content": "now add a docstring"},
    ]
    # Regenerate: the same conversation as the turn before, its answer dropped.
    assert session.messages(["a0", "a1"]) == session.messages(["a0"])
    with pytest.raises(ValueError, match="3 turn"):
        session.messages(["a0", "a1", "a2"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"user": "x", "turns": ["y"]}, "either 'user' or 'turns', not both"),
        ({"turns": []}, "'turns' must be a non-empty list"),
        ({"turns": [{"regenerate": True}]}, "turn 0 must be a non-empty string"),
        ({"turns": ["a", 3]}, 'turn 1 must be a non-empty string or {"regenerate": true}'),
        ({"user": "x", "history": {"a": 1}}, "'history' must be a list of conversations"),
        ({"user": "x", "history": [[{"role": "bot", "content": "y"}]]}, "a history message"),
    ],
)
def test_bad_sessions_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(PromptFileError, match=message.replace("{", "\\{").replace("(", "\\(")):
        parse_prompts(json.dumps({"id": "a", **fields}), source="p.jsonl")


def test_the_attachments_set_asks_the_same_of_an_attached_and_a_pasted_file() -> None:
    attached, pasted = load_prompts(prompt_file("attachments"))
    assert (attached.id, pasted.id) == ("edit-attached-file", "edit-pasted-file")
    (file,) = attached.attachments
    assert file.name == "inventory.py" and 90 <= file.text.count("\n") <= 110
    assert pasted.attachments == ()
    # One prompt, token for token: only where drafting finds the file differs.
    assert attached.messages() == pasted.messages()
    content = attached.messages()[-1]["content"]
    assert content.startswith("inventory.py\n```python\n") and file.text in content


def test_attachments_go_with_the_first_user_message_only() -> None:
    line = json.dumps(
        {"id": "s", "turns": ["look", "again"], "attachments": [{"name": "f.txt", "text": "hi"}]}
    )
    (prompt,) = parse_prompts(line)
    chat = prompt.messages(["ok"])
    assert chat[0]["content"] == "f.txt\n```text\nhi\n```\n\nlook"
    assert chat[2]["content"] == "again"


@pytest.mark.parametrize(
    "attachments",
    [{"name": "f"}, [{"name": "f"}], [{"name": "", "text": "x"}], [{"name": "f", "text": 3}]],
)
def test_bad_attachments_are_refused(attachments: object) -> None:
    line = json.dumps({"id": "a", "user": "hi", "attachments": attachments})
    with pytest.raises(PromptFileError, match=r"^prompts:1: 'attachments' must be a list of"):
        parse_prompts(line)
