"""A chat-completions request body checked field by field into the host's `ChatCall`."""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from typing import Any

from specchat.engine.costs.priors import MAX_K
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, SamplingParams
from specchat.host.chat_call import ChatCall
from specchat.host.errors import ApiError, invalid
from specchat.serve.tool_request import optional_string, parse_tool_calls, parse_tools

#: Roles a message may have; "developer" is OpenAI's newer name for a system message.
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
#: Most stop strings one request may give.
MAX_STOPS = 16


def _type_error(param: str, expected: str) -> ApiError:
    return invalid(f"'{param}' must be {expected}", param=param, code="invalid_type")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(
        value
    )


def _valid(text: str, param: str) -> str:
    """`text` if it can be written as UTF-8: JSON lets a string carry an unpaired surrogate
    ("\\ud800"), which no tokenizer can read, so it is the client's mistake to name here."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise invalid(
            f"'{param}' is not valid text: character {error.start} is half of a character "
            f"(an unpaired surrogate, \\u{ord(text[error.start]):04x}); send Unicode text",
            param=param,
            code="invalid_text",
        ) from None
    return text


def _text(value: object, param: str) -> str:
    """A content field: a string, or a list of text parts joined."""
    if isinstance(value, str):
        return _valid(value, param)
    if isinstance(value, list):
        parts = []
        for index, part in enumerate(value):
            where = f"{param}[{index}]"
            if not isinstance(part, Mapping):
                raise _type_error(where, "an object")
            if part.get("type") != "text":
                raise invalid(
                    f"'{where}' is a {part.get('type')!r} part; only text parts are supported",
                    param=where,
                    code="unsupported_content",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise _type_error(f"{where}.text", "a string")
            parts.append(_valid(text, f"{where}.text"))
        return "".join(parts)
    raise _type_error(param, "a string or a list of text parts")


def _messages(value: object) -> tuple[ChatMessage, ...]:
    if not isinstance(value, list) or not value:
        raise invalid("'messages' must be a non-empty list", param="messages")
    messages = []
    for index, item in enumerate(value):
        where = f"messages[{index}]"
        if not isinstance(item, Mapping):
            raise _type_error(where, "an object")
        role = item.get("role")
        if role not in ROLES:
            raise invalid(
                f"'{where}.role' must be one of system, user, assistant, tool (got {role!r})",
                param=f"{where}.role",
            )
        content = item.get("content")
        if content is None and role in ("assistant", "tool"):
            content = ""  # an assistant turn that only called tools
        calls = parse_tool_calls(item.get("tool_calls"), where) if role == "assistant" else ()
        reasoning = optional_string(item, "reasoning_content", where) if role == "assistant" else ""
        messages.append(
            ChatMessage(
                ROLES[role],
                _text(content, f"{where}.content"),
                tool_calls=calls,
                tool_call_id=optional_string(item, "tool_call_id", where) if role == "tool" else "",
                name=optional_string(item, "name", where) if role == "tool" else "",
                reasoning_content=_valid(reasoning, f"{where}.reasoning_content"),
            )
        )
    return tuple(messages)


def _kwargs_object(value: object) -> Mapping[str, Any] | None:
    """`chat_template_kwargs`: an object of JSON values the template reads as variables."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _type_error("chat_template_kwargs", "an object")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):  # an unpaired \ud800
        raise invalid(
            "'chat_template_kwargs' holds text that is not valid (an unpaired surrogate)",
            param="chat_template_kwargs",
        ) from None
    return dict(value) or None


def _optional_int(body: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise _type_error(key, "an integer")
    if not low <= value <= high:
        raise invalid(f"'{key}' must be between {low} and {high:,} (got {value})", param=key)
    return int(value)


def _number(body: Mapping[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if not _is_number(value):
        raise _type_error(key, "a number")
    if not low <= value <= high:
        raise invalid(f"'{key}' must be between {low:g} and {high:g} (got {value})", param=key)
    return float(value)


def _stop(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (_valid(value, "stop"),) if value else ()
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        if len(value) > MAX_STOPS:
            raise invalid(f"'stop' holds at most {MAX_STOPS} strings", param="stop")
        return tuple(_valid(s, f"stop[{i}]") for i, s in enumerate(value) if s)
    raise _type_error("stop", "a string or a list of strings")


def _prediction(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _type_error("prediction", "an object")
    if value.get("type") != "content":
        raise invalid("'prediction.type' must be 'content'", param="prediction.type")
    return _text(value.get("content"), "prediction.content")


def _speculative(value: object, modes: Collection[str]) -> tuple[str, int]:
    """(mode, K) from the `speculative` field; `modes` are those the loaded pair offers."""
    if value is None:
        return "auto", 4
    if not isinstance(value, Mapping):
        raise _type_error("speculative", "an object")
    mode = value.get("mode", "auto")
    if not isinstance(mode, str):
        raise _type_error("speculative.mode", "a string")
    if mode not in modes:
        raise invalid(
            f"'speculative.mode' {mode!r} is not available here; choose one of " + ", ".join(modes),
            param="speculative.mode",
        )
    k = value.get("k", 4)
    if not _is_int(k) or not 0 <= k <= MAX_K:
        raise invalid(
            f"'speculative.k' must be an integer from 0 to {MAX_K}", param="speculative.k"
        )
    return mode, int(k)


#: `reasoning_effort`'s values; "none" turns thinking off, as llama.cpp's server reads it.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")


def _template_kwargs(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The template's extra variables: `chat_template_kwargs` as sent, and
    `reasoning_effort` (llama.cpp's server: "none" sets `enable_thinking` false, another
    value is passed on as `reasoning_effort`)."""
    kwargs = dict(_kwargs_object(body.get("chat_template_kwargs")) or {})
    thinking = kwargs.get("enable_thinking")
    if thinking is not None and not isinstance(thinking, bool):
        raise _type_error("chat_template_kwargs.enable_thinking", "a boolean")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise invalid(
                "'reasoning_effort' must be one of " + ", ".join(REASONING_EFFORTS),
                param="reasoning_effort",
            )
        if effort == "none":
            kwargs["enable_thinking"] = False
            kwargs.pop("reasoning_effort", None)
        else:
            kwargs["reasoning_effort"] = effort
    return kwargs or None


def parse_chat_call(body: object, *, modes: Collection[str], n_ctx: int) -> ChatCall:
    """Check a decoded JSON body; raises ApiError (400) naming the first field at fault.

    `modes`: the drafting modes the loaded pair offers; `n_ctx`: its context, the most any
    token count may be.
    """
    if not isinstance(body, Mapping):
        raise invalid("the request body must be a JSON object")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise _type_error("model", "a string")
    n = _optional_int(body, "n", 1, 128)
    if n not in (None, 1):
        raise invalid("only n = 1 is supported", param="n", code="unsupported_value")
    if body.get("logprobs"):
        raise invalid("logprobs are not supported", param="logprobs", code="unsupported_value")
    limit = _optional_int(body, "max_completion_tokens", 1, 1 << 30)
    if limit is None:
        limit = _optional_int(body, "max_tokens", 1, 1 << 30)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _type_error("stream", "a boolean")
    options = body.get("stream_options")
    include_usage = False
    if options is not None:
        if not isinstance(options, Mapping):
            raise _type_error("stream_options", "an object")
        include_usage = options.get("include_usage", False)
        if not isinstance(include_usage, bool):
            raise _type_error("stream_options.include_usage", "a boolean")
    seed = _optional_int(body, "seed", -(1 << 63), (1 << 64) - 1)
    try:
        sampling = SamplingParams(
            temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
            top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1.0,
            seed=None if seed is None else seed % (1 << 32),
        )
    except ValueError as error:  # what the engine refuses to sample with
        raise invalid(str(error)) from None
    mode, k = _speculative(body.get("speculative"), modes)
    return ChatCall(
        model=model,
        messages=_messages(body.get("messages")),
        max_tokens=None if limit is None else min(limit, n_ctx),
        controls=Controls(mode, k, sampling),
        stop=_stop(body.get("stop")),
        stream=stream,
        include_usage=include_usage,
        prediction=_prediction(body.get("prediction")),
        tools=parse_tools(body),
        template_kwargs=_template_kwargs(body),
    )
