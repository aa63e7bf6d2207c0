"""Answers in OpenAI's shapes: a chat completion, its stream's chunks, usage and the stats
llama.cpp's server reports (`timings`), plus SpecChat's own (`specchat`)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from specchat.engine.types import StopReason
from specchat.host.answer_format.reader import Piece, Reasoning
from specchat.host.answer_format.splitter import CallOpened, Content
from specchat.host.jobs import Summary, evaluated

#: OpenAI's finish_reason for each way an answer ends.
FINISH_REASONS = {
    StopReason.EOS: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.CANCELLED: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_FULL: "length",
}


def completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def usage(summary: Summary) -> dict[str, Any]:
    """OpenAI's usage; the prediction counts are draft tokens copied from the prediction that
    the target kept (accepted) and that it checked and threw away (rejected)."""
    stats = summary.stats
    cached = summary.prompt_tokens - evaluated(summary.prompt_tokens, stats)
    return {
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": stats.emitted,
        "total_tokens": summary.prompt_tokens + stats.emitted,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {
            "reasoning_tokens": summary.reasoning_tokens,
            "accepted_prediction_tokens": summary.prediction_accepted,
            "rejected_prediction_tokens": summary.prediction_rejected,
        },
    }


def timings(summary: Summary) -> dict[str, Any]:
    """llama.cpp server's `timings`: prompt tokens evaluated (the cached ones are `cache_n`),
    answer tokens, and drafting. Answer tokens are counted as llama.cpp's server counts them:
    the model's end-of-generation token too, whose pass the time holds."""
    stats = summary.stats
    predicted_ms = stats.elapsed_s * 1000.0
    generated = stats.emitted + summary.end_token
    read = evaluated(summary.prompt_tokens, stats)
    return {
        "cache_n": summary.prompt_tokens - read,
        "prompt_n": read,
        "prompt_ms": round(stats.prompt_ms, 3),
        "prompt_per_token_ms": _per(stats.prompt_ms, read),
        "prompt_per_second": _rate(read, stats.prompt_ms),
        "predicted_n": generated,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": _per(predicted_ms, generated),
        "predicted_per_second": _rate(generated, predicted_ms),
        "draft_n": stats.drafted,
        "draft_n_accepted": stats.accepted,
    }


def specchat_stats(summary: Summary) -> dict[str, Any]:
    """SpecChat's own: the speed-up over plain decoding measured on this machine, and the
    kept draft tokens by where they came from."""
    stats = summary.stats
    baseline = summary.baseline
    speed_up = None
    if baseline is not None and baseline.tokens_per_s > 0 and stats.elapsed_s > 0:
        speed_up = round(stats.tokens_per_s / baseline.tokens_per_s, 3)
    figures: dict[str, Any] = {
        "mode": summary.mode,
        "tokens_per_second": round(stats.tokens_per_s, 3),
        "plain_tokens_per_second": round(baseline.tokens_per_s, 3) if baseline else None,
        "plain_measured": baseline.source if baseline else "",
        "speed_up": speed_up,
        "rounds": stats.rounds,
        "tokens_per_pass": round(stats.tau, 3),
        "kept_by_source": {kept.source: kept.tokens for kept in summary.kept},
    }
    if summary.near_ties:
        # A hybrid target's answers can part from plain at a near-tie (LoadInfo.near_ties).
        figures["exactness"] = summary.near_ties
    if summary.tools:
        figures["tool_call_tokens"] = {"written": summary.call_tokens, "kept": summary.call_kept}
    if summary.tools and summary.reply is not None:
        # Arguments are sent as the model wrote them; these are the ones a client cannot
        # read as a JSON object.
        figures["invalid_tool_arguments"] = [
            {"index": index, "id": call.id, "name": call.name, "problem": call.problem}
            for index, call in enumerate(summary.reply.calls)
            if call.problem
        ]
    return figures


def finish_reason(summary: Summary) -> str:
    """OpenAI's finish_reason: "tool_calls" for an answer that called functions and ended
    on its own (one cut short by its length says so)."""
    reason = FINISH_REASONS[summary.stop]
    if summary.reply is not None and summary.reply.calls and reason == "stop":
        return "tool_calls"
    return reason


def message(summary: Summary) -> dict[str, Any]:
    """The answer's message: its text, its thinking (`reasoning_content`, as llama.cpp's
    server and DeepSeek's API name it) and its tool calls, where it has them."""
    reply = summary.reply
    if reply is None:
        return {"role": "assistant", "content": summary.text}
    said: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        said["reasoning_content"] = reply.reasoning
    if not reply.calls:
        return said
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in reply.calls
    ]
    return {**said, "tool_calls": calls}


def completion(summary: Summary, *, model: str, ident: str, created: int) -> dict[str, Any]:
    """The whole non-streamed answer."""
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message(summary),
                "logprobs": None,
                "finish_reason": finish_reason(summary),
            }
        ],
        "usage": usage(summary),
        "timings": timings(summary),
        "specchat": specchat_stats(summary),
    }


def chunk(
    ident: str,
    model: str,
    created: int,
    *,
    delta: dict[str, Any],
    finish: str | None = None,
) -> dict[str, Any]:
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def final_chunk(summary: Summary, ident: str, model: str, created: int) -> dict[str, Any]:
    """The chunk carrying finish_reason, with the stats llama.cpp and SpecChat add."""
    body = chunk(ident, model, created, delta={}, finish=finish_reason(summary))
    body["timings"] = timings(summary)
    body["specchat"] = specchat_stats(summary)
    return body


def tool_delta(piece: Piece) -> dict[str, Any]:
    """A streamed answer's delta for one piece of its split text: thinking, content, or a
    call's id and name (first), or the next part of its arguments."""
    if isinstance(piece, Reasoning):
        return {"reasoning_content": piece.text}
    if isinstance(piece, Content):
        return {"content": piece.text}
    if isinstance(piece, CallOpened):
        function = {"name": piece.name, "arguments": ""}
        call = {"index": piece.index, "id": piece.id, "type": "function", "function": function}
        return {"tool_calls": [call]}
    return {"tool_calls": [{"index": piece.index, "function": {"arguments": piece.text}}]}


def usage_chunk(summary: Summary, ident: str, model: str, created: int) -> dict[str, Any]:
    """`stream_options.include_usage`: a last chunk with no choices and the usage."""
    return {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage(summary),
    }


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def now() -> int:
    return int(time.time())


def _per(ms: float, n: int) -> float | None:
    return round(ms / n, 3) if n else None


def _rate(n: int, ms: float) -> float | None:
    return round(n * 1000.0 / ms, 3) if ms > 0 and n else None
