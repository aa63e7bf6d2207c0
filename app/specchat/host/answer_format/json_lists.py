"""Calls written as JSON between a family's own tags, read as llama.cpp reads them: a list
of `{"name", "arguments"}` objects (Nemotron Nano 2, Apriel, Firefunction), objects one a
line (MiniMax M1, GigaChat), a list of `{name: arguments}` (Apertus), or of
`{"tool_call_id", "tool_name", "parameters"}` (Cohere)."""

from __future__ import annotations

import json
from typing import Any

from specchat.host.answer_format.json_calls import HERMES, ParsedCall, Schemas
from specchat.host.answer_format.thinking_splitter import marker_start


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _list(body: str) -> list[Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, list) and value else None


def _objects(body: str, name_key: str, arguments_key: str) -> list[ParsedCall] | None:
    """A JSON list of call objects naming their function under `name_key` and their
    arguments under `arguments_key`; None where any item is no such object."""
    items = _list(body)
    if items is None:
        return None
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get(name_key), str):
            return None
        calls.append(ParsedCall(item[name_key], _arguments(item.get(arguments_key, {}))))
    return calls


def read_json_list(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`[{"name": ..., "arguments": {...}}, ...]`."""
    del schemas
    return _objects(body, "name", "arguments")


def read_list_or_objects(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """A JSON list of calls, or call objects one after another (as Hermes' are read)."""
    if body.lstrip().startswith("["):
        return read_json_list(body, schemas)
    return HERMES.parse(body, schemas)


def read_keyed_list(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`[{"name": {arguments}}, ...]`: each object's one key the function."""
    del schemas
    items = _list(body)
    if items is None:
        return None
    calls = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            return None
        ((name, arguments),) = item.items()
        calls.append(ParsedCall(str(name), _arguments(arguments)))
    return calls


def read_functools(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """Firefunction's `functools[...]` (the marker kept in the call's text)."""
    return read_json_list(body.removeprefix("functools"), schemas)


#: Cohere's action block's closing, which may be all the text holds of it at the end.
COHERE_END = "<|END_ACTION|>"


def read_cohere(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`[{"tool_call_id": "0", "tool_name": ..., "parameters": {...}}, ...]`."""
    del schemas
    text = body.rstrip()
    text = text[: len(text) - marker_start(text, (COHERE_END,))]
    return _objects(text, "tool_name", "parameters")
