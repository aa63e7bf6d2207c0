"""`specchat bench --via-api` with a chat of several turns: each follow-up through a real
server reads only its new tokens, counted (never timed) on the tiny pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.api.follow_up import measure_follow_ups
from specchat.bench.prompts import FOLLOW_UP_PROMPTS, BenchPrompt, load_prompts, prompt_file
from specchat.cli import main
from specchat.engine.attachments import Attachment
from specchat.engine.session import ChatEngine
from specchat.tinymodels import TinyModels

#: About 2,000 tokens of code on the tiny byte-level vocabulary.
FILE = "".join(f"def step_{i}(total, price):\n    return total + price * {i}\n" for i in range(45))


def _chat(prompt_id: str, turns: int = 3) -> BenchPrompt:
    questions = ("What does step_3 do?", "And step_4?", "Which one is largest?")[:turns]
    attached = Attachment("steps.py", FILE, "utf-8", len(FILE))
    return BenchPrompt(
        prompt_id,
        questions[0],
        system="You answer questions about the user's file.",
        turns=questions,
        attachments=(attached,),
    )


def test_each_follow_up_evaluates_only_its_new_tokens(tiny_models: TinyModels) -> None:
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=4096, n_threads=1)
    try:
        [chat] = measure_follow_ups(engine, [_chat("steps")], max_tokens=16)
    finally:
        engine.close()
    first, *later = chat.turns
    assert first.prompt_tokens >= 2000
    # The first request reads its prefix whole.
    assert first.evaluated == first.prompt_tokens and first.cached == 0
    assert len(later) == 2
    before = first
    for turn in later:
        # The chat so far is cached; only the answer and the new question are read.
        assert turn.cached >= before.prompt_tokens
        assert turn.evaluated <= turn.prompt_tokens - before.prompt_tokens
        assert turn.evaluated > 0
        assert turn.first_token_s > 0 and turn.tokens > 0
        before = turn


def test_a_follow_up_after_another_chat_still_reads_only_its_new_tokens(
    tiny_models: TinyModels,
) -> None:
    # A chat about the file, another chat, then the first chat again: the server's prefix
    # cache brings the file's prefix back instead of reading it again.
    other = BenchPrompt("poem", "Write about the sea. " * 80, system="You write poems.")
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=4096, n_threads=1)
    try:
        results = measure_follow_ups(
            engine, [_chat("steps", turns=2), other, _chat("steps-again", turns=2)], max_tokens=8
        )
    finally:
        engine.close()
    again = results[2].turns
    # The same file and question as the first chat: its prefix comes back from memory.
    # (All but its last token, which the first round reads.)
    assert again[0].cached == results[0].turns[0].prompt_tokens - 1
    assert again[1].evaluated <= again[1].prompt_tokens - again[0].prompt_tokens


def test_the_shipped_follow_up_set_is_chats_about_a_long_file() -> None:
    prompts = load_prompts(prompt_file("follow-up"))
    assert prompt_file("follow-up") == FOLLOW_UP_PROMPTS
    assert len(prompts) >= 2
    for prompt in prompts:
        assert prompt.turn_count == 2
        # About 2,000 tokens of code (some 4 characters a token).
        assert sum(len(a.text) for a in prompt.attachments) > 6000


def test_bench_via_api_reports_each_follow_up(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {
        "id": "chat",
        "system": "You answer questions about the user's file.",
        "turns": ["What does step_3 do?", "And step_4?"],
        "attachments": [{"name": "steps.py", "text": FILE}],
    }
    prompts = tmp_path / "chats.jsonl"
    prompts.write_text(json.dumps(line) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    target = ["--target", str(tiny_models.target), "--draft", str(tiny_models.draft_close)]
    options = ["--prompts", str(prompts), "--via-api", "--max-tokens", "8", "--threads", "1"]
    code = main(["bench", *target, *options, "--ctx", "4096", "--out", str(out)])
    printed = capsys.readouterr().out
    report = json.loads((out / "follow-up.json").read_text(encoding="utf-8"))
    [chat] = report["prompts"]
    first, follow_up = chat["turns"]
    assert follow_up["cached_tokens"] >= first["prompt_tokens"]
    assert follow_up["prompt_tokens_evaluated"] == (
        follow_up["prompt_tokens"] - follow_up["cached_tokens"]
    )
    assert report["slowest_follow_up_first_token_s"] == follow_up["first_token_s"]
    assert "slowest follow-up's first token" in printed
    assert not (out / "via-api.json").exists()  # no single prompt to compare
    # The tiny pair answers in milliseconds: the goal is the default pair's, not judged here.
    assert code in (0, 1)


def test_a_request_the_api_refuses_ends_the_bench_in_one_line(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {
        "id": "chat",
        "turns": ["What does step_3 do?", "And step_4?"],
        "attachments": [{"name": "steps.py", "text": FILE}],
    }
    prompts = tmp_path / "chats.jsonl"
    prompts.write_text(json.dumps(line) + "\n", encoding="utf-8")
    target = ["--target", str(tiny_models.target), "--draft", str(tiny_models.draft_close)]
    options = ["--prompts", str(prompts), "--via-api", "--max-tokens", "8", "--threads", "1"]
    # The file alone outgrows a 1,024-token context.
    assert main(["bench", *target, *options, "--ctx", "1024", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    said = [x for x in err.splitlines() if x.startswith("specchat:")]
    assert len(said) == 1 and said[0].startswith("specchat: chat, turn 0: the API answered 400")
    assert "context holds 1,024" in said[0]
