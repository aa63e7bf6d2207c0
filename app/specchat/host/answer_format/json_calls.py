"""How a model family writes tool calls in its answer: where a call opens and closes, how its
text reads as calls, and what opening a required call forces onto the answer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

#: A call's name and the start of its arguments, as a model writes them first (streamed
#: from their first character on); a call written otherwise is read whole once it closes.
_HEAD = re.compile(
    r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\S)'
)
_DECODER = json.JSONDecoder()
#: A name alone, and where arguments start, for a call whose JSON is broken.
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"(?:arguments|parameters)"\s*:\s*')


@dataclass(frozen=True)
class Opening:
    """A text that opens a call.

    Attributes:
        marker: the text.
        closing: the text that closes the call, or "" (it runs to the answer's end).
        at_start: it opens a call only at the answer's start (after white space).
        kept: the marker is the call's own first character (a JSON object's brace).
        loose: the marker also opens text that is no call (a fenced JSON block, an object):
            what it opens is a call only where it has a name and arguments, or names a
            function the request offers.
    """

    marker: str
    closing: str = ""
    at_start: bool = False
    kept: bool = False
    loose: bool = False


@dataclass(frozen=True)
class ParsedCall:
    """One call read from the model's text.

    Attributes:
        name: the function's name.
        arguments: its arguments as JSON text, as the model wrote them.
    """

    name: str
    arguments: str


#: Each offered function's parameters' JSON schema, by its name.
Schemas = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Markup:
    """A call format that is no JSON object (Qwen's XML, Gemma 4's): how a call's text reads
    and how a required call's start is written.

    Attributes:
        read: a call block's text (opening and closing left out) read as calls, given the
            offered functions' parameter schemas; None where it is no call.
        before_name: a required call's forced start, up to the function's name.
        after_name: what follows the name when a function is named.
        head: a call's name and where its arguments start, once its text says both, for a
            format whose arguments stream as they come; None: a call is read once closed.
        so_far: its arguments as JSON text as far as the call's text says them, each later
            one continuing it (the text, where its arguments start, the schemas, the name,
            and whether the call's text ended).
        held: whether a call to a function of these parameters is sent only once closed,
            not streamed: a value it types as JSON may turn out to be none, and llama.cpp
            then reads no call (`read` answers []); None for never.
    """

    read: Callable[[str, Schemas], list[ParsedCall] | None]
    before_name: str
    after_name: str
    head: Callable[[str], tuple[str, int] | None] | None = None
    so_far: Callable[..., str] | None = None
    held: Callable[[Mapping[str, Any] | None], bool] | None = None


@dataclass(frozen=True)
class ToolSyntax:
    """One family's tool-call format.

    Attributes:
        key: short id ("hermes").
        label: for people.
        openings: the texts that open a call, the format's own first.
        before: what a required call's forced start writes before the call's object.
        arguments_key: the key the object names its arguments by.
        name_first: the name and arguments are one JSON object, the name first (a closed
            call's arguments are streamed as they come; otherwise it is sent once read).
        args_marker: Mistral's `[ARGS]` form (`[TOOL_CALLS]name[ARGS]{...}`), or "".
        markup: the reader of a format whose calls are no JSON object, or None.
        named_opening: an opening written with an offered function's name in its marker
            (`{name}`), kept in the call's text: Qwen3-Coder's `<function=name>` when it
            leaves out `<tool_call>`; None for none.
    """

    key: str
    label: str
    openings: tuple[Opening, ...]
    before: str = ""
    arguments_key: str = "arguments"
    name_first: bool = True
    args_marker: str = ""
    markup: Markup | None = None
    named_opening: Opening | None = None

    def openings_for(self, names: Iterable[str]) -> tuple[Opening, ...]:
        """The openings of an answer offered the functions `names`."""
        named = self.named_opening
        if named is None:
            return self.openings
        own = (replace(named, marker=named.marker.format(name=name)) for name in names)
        return (*self.openings, *own)

    # --- what a required call forces ----------------------------------------------------
    def prefix(self, function: str | None) -> str:
        """The answer's forced start when a call is required: the opening up to the name,
        and the function's name where one is named (no space after it: the model writes its
        arguments' first token as it would). The name's start is forced too: after
        `<tool_call>` alone Qwen2.5-Coder 1.5B ends its answer."""
        if self.markup is not None:
            named = f"{function}{self.markup.after_name}" if function else ""
            return self.markup.before_name + named
        if self.args_marker:
            return self.before + (f"{function}{self.args_marker}" if function else "")
        if function is None:
            return f'{self.before}{{"name": "'
        return f'{self.before}{{"name": {json.dumps(function)}, "{self.arguments_key}":'

    # --- reading ------------------------------------------------------------------------
    def head(self, opening: Opening, body: str) -> tuple[str, int] | None:
        """A call's name and where its arguments start, once the body says both (only for a
        closed call written as one object, name first)."""
        if not (opening.closing and self.name_first):
            return None
        match = _HEAD.match(body)
        if match is None:
            return None
        return _unescape(match.group(1)), match.end()

    def parse(self, body: str, schemas: Schemas | None = None) -> list[ParsedCall] | None:
        """The calls in one call's text (opening and closing left out); None when it names
        no function (it is then the answer's text, as written), [] for a malformed call
        llama.cpp reads as nothing at all. `schemas`: the offered
        functions' parameters, which type a markup format's values."""
        if self.markup is not None:
            return self.markup.read(body, schemas or {})
        if self.key == "mistral":
            return _mistral(body, self.openings[0].marker, self.args_marker)
        return _objects(body)


def arguments_of(body: str, start: int) -> str:
    """The arguments' text of a name-first call whose arguments start at `start`: its object
    closed, less the brace closing the call itself (kept if the arguments need it)."""
    whole = body[start:].strip()
    if whole.endswith("}"):
        inner = whole[:-1].rstrip()
        if _is_object(inner) or not _is_object(whole):
            return inner
    return whole


def held_from(body: str, start: int, closing: str) -> int:
    """How far a streamed call's arguments may be sent: not its end, which may turn out to
    be the brace closing the call, white space before it or the closing's first part."""
    end = len(body)
    for size in range(min(len(closing) - 1, end - start), 0, -1):
        if body.endswith(closing[:size]):
            end -= size
            break
    end = start + len(body[start:end].rstrip())
    if end > start and body[end - 1] == "}":
        end = start + len(body[start : end - 1].rstrip())
    return end


def has_arguments(text: str) -> bool:
    """Whether a call's text has its arguments' key (`"arguments":` or `"parameters":`)."""
    return _ARGS.search(text) is not None


def invalid_reason(arguments: str) -> str:
    """Why `arguments` is not a JSON object ("" when it is one)."""
    try:
        value = json.loads(arguments)
    except ValueError as error:
        return f"not valid JSON ({error})"
    return "" if isinstance(value, dict) else "not a JSON object"


def _is_object(text: str) -> bool:
    return invalid_reason(text) == ""


def _unescape(text: str) -> str:
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text


def _objects(text: str) -> list[ParsedCall] | None:
    """Calls written as JSON objects, one or several in a row (a model writing two calls in
    one block); anything else is read as one broken call, its arguments kept as written."""
    calls = []
    at = _skip(text, 0)
    while at < len(text):
        try:
            value, end = _DECODER.raw_decode(text, at)
        except ValueError:
            break
        call = _as_call(text[at:end], value)
        if call is None:
            break
        calls.append(call)
        at = _skip(text, end)
    else:
        if calls:
            return calls
    call = _broken(text.strip())
    return None if call is None else [call]


def _skip(text: str, at: int) -> int:
    """Past the white space (and separators) between calls written in a row."""
    while at < len(text) and (text[at].isspace() or text[at] in ",;"):
        at += 1
    return at


def _as_call(raw: str, value: object) -> ParsedCall | None:
    """A parsed object as a call, its arguments' text as written where it can be cut out."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    head = _HEAD.match(raw)
    if head is not None:
        end = value_end(raw, head.end())
        if end is not None:
            return ParsedCall(value["name"], raw[head.end() : end])
    if isinstance(arguments, str):
        return ParsedCall(value["name"], arguments)
    return ParsedCall(value["name"], json.dumps(arguments, ensure_ascii=False))


def _broken(text: str) -> ParsedCall | None:
    """A call whose JSON does not parse: its name, and its arguments as written."""
    head = _HEAD.match(text)
    if head is not None:
        return ParsedCall(_unescape(head.group(1)), arguments_of(text, head.end()))
    name = _NAME.search(text)
    if name is None or _parses(text):  # whole JSON, and no call: not one
        return None
    return ParsedCall(_unescape(name.group(1)), _loose_arguments(text))


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def value_end(text: str, start: int) -> int | None:
    """Where a JSON object, list or string starting at `start` ends, once it is whole (None
    before; a number or a word cannot say it is whole until what follows it)."""
    if start >= len(text) or text[start] not in '{["':
        return None
    try:
        return int(_DECODER.raw_decode(text, start)[1])
    except ValueError:
        return None


def _loose_arguments(text: str) -> str:
    """The arguments of a call whose JSON is broken around them (a model copying its
    template's `{{"name": ...}}`): the value after `"arguments":` where it reads as JSON,
    else the rest as written."""
    found = _ARGS.search(text)
    if found is None:
        return ""
    end = value_end(text, found.end())
    return text[found.end() :].rstrip() if end is None else text[found.end() : end]


def _mistral(body: str, opening: str, args_marker: str) -> list[ParsedCall] | None:
    """`[{"name": ..., "arguments": ...}, ...]`, or `name[ARGS]{...}` repeated after the
    opening."""
    text = body.strip()
    if text.startswith("["):
        try:
            value = json.loads(text)
        except ValueError:
            return _objects(text.removeprefix("[").removesuffix("]"))
        if not isinstance(value, list):
            return None
        found = [_as_call(json.dumps(item, ensure_ascii=False), item) for item in value]
        listed = [call for call in found if call is not None]
        return listed if listed and len(listed) == len(found) else None
    calls = []
    for part in text.split(opening):
        name, marker, arguments = part.partition(args_marker or "[ARGS]")
        if not marker or not name.strip():
            return None
        calls.append(ParsedCall(name.strip(), arguments.strip()))
    return calls or None


#: A call in a fenced JSON block, or an answer that is one JSON object: how small models
#: often answer where their template asks for more (Qwen2.5-Coder 1.5B at T = 0 fences it).
#: llama.cpp's server reads both for Hermes' format too.
_FENCED = Opening("```json", closing="```", loose=True)
_BARE = Opening("{", at_start=True, kept=True, loose=True)

#: Qwen 2.5 and 3, Hermes and most fine-tunes: `<tool_call>{"name", "arguments"}</tool_call>`.
HERMES = ToolSyntax(
    "hermes",
    "Hermes <tool_call>",
    (Opening("<tool_call>", closing="</tool_call>"), _FENCED, _BARE),
    before="<tool_call>\n",
)
#: Llama 3.1-3.3: the answer is `{"name", "parameters"}` (after `<|python_tag|>` or none).
LLAMA3 = ToolSyntax(
    "llama3",
    "Llama 3 JSON",
    (Opening("<|python_tag|>"), _BARE, _FENCED),
    arguments_key="parameters",
    name_first=False,
)
#: Mistral: `[TOOL_CALLS][{"name", "arguments"}]` (v3), or `[TOOL_CALLS]name[ARGS]{...}`.
MISTRAL = ToolSyntax(
    "mistral",
    "Mistral [TOOL_CALLS]",
    (Opening("[TOOL_CALLS]"),),
    before="[TOOL_CALLS][",
    name_first=False,
)
MISTRAL_ARGS = ToolSyntax(
    "mistral",
    "Mistral [TOOL_CALLS] [ARGS]",
    (Opening("[TOOL_CALLS]"),),
    before="[TOOL_CALLS]",
    name_first=False,
    args_marker="[ARGS]",
)


def syntax_of(template: str) -> ToolSyntax:
    """The format a chat template asks its model to call tools in, from the template's text;
    Hermes (the most common) where it names none of the others'."""
    if "[TOOL_CALLS]" in template:
        return MISTRAL_ARGS if "[ARGS]" in template else MISTRAL
    if "<|start_header_id|>" in template and "<tool_call>" not in template:
        return LLAMA3
    return HERMES
