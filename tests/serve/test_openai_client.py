"""`specchat serve` driven by the official `openai` package: answers, streams, errors."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from specchat.cli import main
from specchat.host.thread import HostThread
from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hello there, hello again"},
]


def client(server: ApiServer) -> openai.OpenAI:
    assert server.address is not None
    return openai.OpenAI(base_url=server.address.base_url, api_key="unused", max_retries=0)


def plain_cli_answer(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str], *, max_tokens: int
) -> str:
    """`specchat generate --mode plain` for MESSAGES, as the terminal prints it."""
    code = main(
        [
            "generate",
            "--target",
            str(tiny_models.target),
            "--draft",
            str(tiny_models.draft_close),
            "--mode",
            "plain",
            "--max-tokens",
            str(max_tokens),
            "--n-ctx",
            "1024",
            "--threads",
            "1",
            "--color",
            "never",
            "--system",
            MESSAGES[0]["content"],
            "--prompt",
            MESSAGES[1]["content"],
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert out.endswith("\n")
    return out[:-1]


def test_models_lists_the_loaded_target(server: ApiServer) -> None:
    listed = client(server).models.list()
    assert [m.id for m in listed.data] == ["tiny-target"]
    assert client(server).models.retrieve("tiny-target").id == "tiny-target"
    with pytest.raises(openai.NotFoundError):
        client(server).models.retrieve("gpt-4")


def test_answer_reports_usage_timings_and_speculative_stats(server: ApiServer) -> None:
    reply = client(server).chat.completions.create(
        model="anything", messages=MESSAGES, temperature=0, max_tokens=24
    )
    assert reply.object == "chat.completion"
    assert reply.model == "tiny-target"
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    usage = reply.usage
    assert usage is not None
    assert usage.completion_tokens == 24
    assert usage.total_tokens == usage.prompt_tokens + 24
    extra: dict[str, Any] = reply.model_extra or {}
    timings, stats = extra["timings"], extra["specchat"]
    assert timings["predicted_n"] == 24
    assert timings["prompt_n"] + timings["cache_n"] == usage.prompt_tokens
    assert timings["draft_n"] >= timings["draft_n_accepted"] >= 0
    assert stats["mode"] == "auto"
    assert sum(stats["kept_by_source"].values()) == timings["draft_n_accepted"]


def test_greedy_answer_equals_specchat_generate_plain(
    server: ApiServer, tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = plain_cli_answer(tiny_models, capsys, max_tokens=40)
    api = client(server)
    for mode in ("auto", "plain", "draft", "suffix"):
        reply = api.chat.completions.create(
            model="m",
            messages=MESSAGES,
            temperature=0,
            max_tokens=40,
            extra_body={"speculative": {"mode": mode, "k": 3}},
        )
        assert reply.choices[0].message.content == expected, mode
        stats = (reply.model_extra or {})["specchat"]
        assert stats["mode"] == mode


def test_stream_matches_the_whole_answer_and_ends_with_stats(server: ApiServer) -> None:
    api = client(server)
    whole = api.chat.completions.create(model="m", messages=MESSAGES, temperature=0, max_tokens=30)
    chunks = list(
        api.chat.completions.create(
            model="m",
            messages=MESSAGES,
            temperature=0,
            max_tokens=30,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "length"
    extra: dict[str, Any] = finals[0].model_extra or {}
    assert extra["timings"]["predicted_n"] == 30
    assert "speed_up" in extra["specchat"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 30


def test_plain_mode_drafts_nothing(server: ApiServer) -> None:
    reply = client(server).chat.completions.create(
        model="m",
        messages=MESSAGES,
        temperature=0,
        max_tokens=16,
        extra_body={"speculative": {"mode": "plain"}},
    )
    assert (reply.model_extra or {})["timings"]["draft_n"] == 0


def test_stop_strings_end_the_answer_before_them(server: ApiServer) -> None:
    api = client(server)
    whole = api.chat.completions.create(model="m", messages=MESSAGES, temperature=0, max_tokens=30)
    text = whole.choices[0].message.content or ""
    stop = text[5:8]
    cut = api.chat.completions.create(
        model="m", messages=MESSAGES, temperature=0, max_tokens=30, stop=[stop]
    )
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"speculative": {"mode": "telepathy"}}, "speculative.mode"),
        ({"speculative": {"mode": "auto", "k": 99}}, "speculative.k"),
        ({"temperature": "hot"}, "temperature"),
        ({"prediction": {"type": "content", "content": 7}}, "prediction.content"),
    ],
)
def test_bad_requests_are_400_naming_the_field(
    server: ApiServer, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=4, extra_body=extra
        )
    error = caught.value.body
    assert isinstance(error, dict) and error["param"] == param
    assert error["type"] == "invalid_request_error" and error["message"]


def test_a_prompt_over_the_context_is_400_with_the_numbers(server: ApiServer) -> None:
    long = "word " * 2000
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="m", messages=[{"role": "user", "content": long}], max_tokens=4
        )
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "context_length_exceeded"
    assert "1,024" in error["message"]


def test_greedy_answer_with_a_prediction_equals_plain(
    server: ApiServer, tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = plain_cli_answer(tiny_models, capsys, max_tokens=60)
    api = client(server)
    garbage = "zq#" * 300
    for prediction, mode in ((expected, "prediction"), (expected, "auto"), (garbage, "auto")):
        reply = api.chat.completions.create(
            model="m",
            messages=MESSAGES,
            temperature=0,
            max_tokens=60,
            prediction={"type": "content", "content": prediction},
            extra_body={"speculative": {"mode": mode, "k": 8}},
        )
        assert reply.choices[0].message.content == expected, (mode, prediction[:9])
    parts = [{"type": "text", "text": expected[:20]}, {"type": "text", "text": expected[20:]}]
    pinned = api.chat.completions.create(
        model="m",
        messages=MESSAGES,
        temperature=0,
        max_tokens=60,
        prediction={"type": "content", "content": parts},  # type: ignore[typeddict-item]
        extra_body={"speculative": {"mode": "prediction", "k": 8}},
    )
    assert pinned.choices[0].message.content == expected
    assert pinned.usage is not None and pinned.usage.completion_tokens_details is not None
    details = pinned.usage.completion_tokens_details
    kept = (pinned.model_extra or {})["specchat"]["kept_by_source"]
    # Less than all of it: the tiny model writes bytes that are no UTF-8, which come back as
    # other tokens in a text prediction.
    assert details.accepted_prediction_tokens == kept["prediction"] >= 10
    timings = (pinned.model_extra or {})["timings"]
    assert details.rejected_prediction_tokens == timings["draft_n"] - timings["draft_n_accepted"]


def test_a_wrong_prediction_is_counted_as_rejected(server: ApiServer) -> None:
    api = client(server)
    answer = api.chat.completions.create(model="m", messages=MESSAGES, temperature=0, max_tokens=30)
    backwards = (answer.choices[0].message.content or "")[::-1] * 3  # its tokens, out of order
    reply = api.chat.completions.create(
        model="m",
        messages=MESSAGES,
        temperature=0,
        max_tokens=30,
        prediction={"type": "content", "content": backwards},
        extra_body={"speculative": {"mode": "prediction", "k": 4}},
    )
    assert reply.usage is not None and reply.usage.completion_tokens_details is not None
    details = reply.usage.completion_tokens_details
    assert reply.choices[0].message.content == answer.choices[0].message.content
    timings = (reply.model_extra or {})["timings"]
    assert details.rejected_prediction_tokens == timings["draft_n"] - timings["draft_n_accepted"]
    assert details.rejected_prediction_tokens > details.accepted_prediction_tokens


def test_an_answer_the_model_ends_counts_its_end_token_as_llama_server_does(
    server: ApiServer,
) -> None:
    """`timings` count the end-of-generation token (its pass is in `predicted_ms`), as
    llama.cpp's server does; the usage counts the answer's own tokens."""
    assert isinstance(server.executor, HostThread)
    engine = server.executor.host.engine
    assert engine is not None
    target = engine.target
    before = target.end_of_turn
    target.end_of_turn = frozenset(range(target.n_vocab))  # whatever it writes ends it
    try:
        reply = client(server).chat.completions.create(
            model="m", messages=MESSAGES, temperature=0, max_tokens=10
        )
    finally:
        target.end_of_turn = before
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens == 0
    timings = (reply.model_extra or {})["timings"]
    assert timings["predicted_n"] == 1 and timings["predicted_ms"] > 0
    assert timings["predicted_per_second"] > 0
