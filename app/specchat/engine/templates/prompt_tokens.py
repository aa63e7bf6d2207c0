"""A chat made into prompt tokens: the template's markers as special tokens, messages as text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from specchat.engine.templates.chat_message import ChatMessage
from specchat.engine.templates.guards import PREFIX, ChatTemplateError, ChatTemplateProblem
from specchat.engine.types import SpecialToken

#: What a chat template may add to its messages' own text, in UTF-8 bytes: real templates
#: add tens of bytes a message and at most a few kilobytes once (a default system prompt, a
#: date, tool instructions). Past this the template, not the chat, made the prompt: it is
#: refused before its text is tokenized (docs/reliability.md, "A template's output").
TEMPLATE_BYTES = 64 * 1024
#: The same allowance for every message of the chat.
TEMPLATE_BYTES_PER_MESSAGE = 1024
#: Placeholders stand for a marker's text pasted into a message while the template renders;
#: they are built from a private-use character no message contains.
_PLACEHOLDER_FIRST = 0xF0000
_PLACEHOLDER_LAST = 0xFFFFD
#: Whitespace as llama.cpp's C isspace() sees it, for a special token's lstrip/rstrip.
_C_SPACE = " \t\n\v\f\r"


class Vocabulary(Protocol):
    """What the prompt tokenizer needs of a model (LlamaModel has it)."""

    def tokenize(
        self, text: str, *, add_special: bool = False, parse_special: bool = True
    ) -> list[int]: ...

    def special_tokens(self) -> Mapping[str, SpecialToken]: ...


class Renderer(Protocol):
    """What the prompt tokenizer needs of a chat template (ChatTemplate has it)."""

    def render(
        self,
        messages: Iterable[ChatMessage],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> str: ...


def _finder(texts: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching any of `texts`, the longest where several start at one place.

    Built as a trie: a vocabulary can spell thousands of special tokens (Gemma's
    `<unused…>`), and an alternation of them all is tried one by one at every `<` of a
    message, about a second for 100 KB of code."""
    trie: dict[str, Any] = {}
    for text in {t for t in texts if t}:
        node = trie
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}
    return re.compile(_pattern(trie)) if trie else None


def _pattern(node: dict[str, Any]) -> str:
    branches = [re.escape(char) + _pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    # A spelling ending here as well: the longer one is tried first (greedy), as llama.cpp
    # takes the longest special token.
    return f"(?:{body})?" if "" in node else body


def template_too_large(rendered: int, said: int) -> ChatTemplateError:
    """The template's output dwarfs the messages it was given."""
    return ChatTemplateError(
        ChatTemplateProblem.LIMIT,
        f"{PREFIX} wrote {rendered:,} bytes for {said:,} bytes of messages; SpecChat "
        "refused to use it (the model's template, not your message, is the cause)",
    )


class PromptTokenizer:
    """Renders a chat and tokenizes it so that only the template's own text can hold
    special tokens: a message that spells `<|im_end|>` is read as those characters, never
    as the marker, whoever wrote it (a user, a pasted file, an API client).

    A chat whose messages spell no special token is tokenized exactly as before (the whole
    rendered text, special tokens parsed), so prompts and cached prefixes do not change.
    Otherwise each such spelling is swapped for a placeholder while the template renders;
    the template's text is then split at its special tokens as llama.cpp splits it, and
    every stretch between them is tokenized as text with the message text put back.

    Attributes:
        markers: the chat format's marker texts, kept out of messages even where the
            vocabulary makes them user-defined tokens (Gemma's turn markers).
    """

    def __init__(self, model: Vocabulary, template: Renderer, *, markers: Iterable[str] = ()):
        self.markers = tuple(markers)
        self._model = model
        self._template = template
        self._specials: Mapping[str, SpecialToken] | None = None
        self._in_messages: re.Pattern[str] | None = None
        self._in_template: re.Pattern[str] | None = None

    # --- the tables, built on first use ---------------------------------------------------
    def load(self) -> Mapping[str, SpecialToken]:
        """Read the vocabulary's special tokens now (otherwise the first chat does)."""
        if self._specials is None:
            specials = dict(self._model.special_tokens())
            marked = set(self.markers)
            self._in_messages = _finder(t for t, s in specials.items() if s.control or t in marked)
            self._in_template = _finder(specials)
            self._specials = specials
        return self._specials

    # --- tokens ----------------------------------------------------------------------------
    def tokens(
        self,
        messages: Sequence[ChatMessage],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        answer_prefix: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """The prompt tokens of `messages` (and the functions `tools` offers, where given);
        raises ChatTemplateError when the template's output is far larger than the messages
        (before anything is tokenized).

        `answer_prefix`: text the answer is made to start with, written after the template's
        (its special tokens read as such): a tool call's opening, where one is required.
        `extra`: the request's own template variables (chat_template_kwargs); their texts
        are the client's, escaped like the messages'."""
        specials = self.load()
        for message in messages:
            check_text(message)
        for text in _strings(tools):
            _check(text, "a tool definition")
        for text in _strings(extra):
            _check(text, "a template variable")
        given = [*messages, *_as_messages(tools, "tool definition"), *_as_messages(extra, "kwargs")]
        pasted: list[str] = []
        mark = _placeholder_char(given)
        chat = [self._escape(m, pasted, mark) for m in messages]
        text = self._template.render(
            chat,
            add_generation_prompt=add_generation_prompt,
            tools=None if tools is None else [self._escape_value(t, pasted, mark) for t in tools],
            extra=None if extra is None else self._escape_value(extra, pasted, mark),
        )
        check_template_size(text, given)
        text += answer_prefix
        if not pasted:
            tokens = self._model.tokenize(text, add_special=False, parse_special=True)
        else:
            tokens = self._tokens_with_pasted(text, pasted, mark, specials)
        if not tokens and add_generation_prompt:
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED,
                f"{PREFIX} wrote nothing for this chat, so there is no prompt to answer; "
                "the model's template, not your message, is the cause",
            )
        return tokens

    def _escape(self, message: ChatMessage, pasted: list[str], mark: str) -> ChatMessage:
        finder = self._in_messages
        if finder is None or not any(finder.search(text) for text in message.texts()):
            return message

        def escaped(text: str) -> str:
            return self._escape_text(text, pasted, mark)

        calls = tuple(
            replace(call, name=escaped(call.name), arguments=escaped(call.arguments))
            for call in message.tool_calls
        )
        return replace(
            message,
            content=escaped(message.content),
            reasoning_content=escaped(message.reasoning_content),
            tool_calls=calls,
            tool_call_id=escaped(message.tool_call_id),
            name=escaped(message.name),
        )

    def _escape_value(self, value: Any, pasted: list[str], mark: str) -> Any:
        """A tool definition with every string in it escaped (its description is the
        client's text, which the template pastes into the prompt)."""
        if isinstance(value, str):
            return self._escape_text(value, pasted, mark)
        if isinstance(value, Mapping):
            return {key: self._escape_value(item, pasted, mark) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._escape_value(item, pasted, mark) for item in value]
        return value

    def _escape_text(self, text: str, pasted: list[str], mark: str) -> str:
        if self._in_messages is None:
            return text

        def placeholder(match: re.Match[str]) -> str:
            pasted.append(match.group(0))
            return f"{mark}{len(pasted) - 1}{mark}"

        return self._in_messages.sub(placeholder, text)

    def _tokens_with_pasted(
        self, text: str, pasted: list[str], mark: str, specials: Mapping[str, SpecialToken]
    ) -> list[int]:
        tokens: list[int] = []
        restore = re.compile(f"{mark}([0-9]+){mark}")
        for piece in split_specials(text, specials, self._in_template):
            if isinstance(piece, int):
                tokens.append(piece)
                continue
            for stretch in _restored(piece, restore, pasted, specials):
                tokens += self._model.tokenize(stretch, add_special=False, parse_special=False)
        return tokens


class MessageTextError(ValueError):
    """A message holds what is not text (a lone surrogate: undecodable bytes read as
    PEP 383 escapes, or a JSON string's unpaired \\ud800); the message is for people."""


def check_text(message: ChatMessage) -> None:
    for text in message.texts():
        _check(text, f"a {message.role} message")


def _check(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise MessageTextError(
            f"{what} is not valid text: character {error.start} is half of a character "
            "(an unpaired surrogate)"
        ) from None


def check_template_size(text: str, messages: Sequence[ChatMessage]) -> None:
    """Refuse a rendered prompt whose size the messages do not explain (before tokenizing:
    a 16 MB prompt costs gigabytes and seconds to tokenize, to be refused after)."""
    rendered = len(text.encode("utf-8", errors="replace"))
    said = sum(len(t.encode("utf-8", errors="replace")) for m in messages for t in m.texts())
    if rendered > said + TEMPLATE_BYTES + TEMPLATE_BYTES_PER_MESSAGE * len(messages):
        raise template_too_large(rendered, said)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value (keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _as_messages(value: Any, role: str) -> list[ChatMessage]:
    """Tool definitions or template variables as a message of their JSON text: what the
    size check and the placeholder's choice weigh them as."""
    if not value:
        return []
    if isinstance(value, Mapping):
        value = dict(value)
    elif not isinstance(value, str):
        value = list(value)
    return [ChatMessage(role, json.dumps(value, ensure_ascii=False))]


def _placeholder_char(messages: Sequence[ChatMessage]) -> str:
    for code in range(_PLACEHOLDER_FIRST, _PLACEHOLDER_LAST):
        mark = chr(code)
        if not any(mark in text for m in messages for text in m.texts()):
            return mark
    raise ChatTemplateError(ChatTemplateProblem.FAILED, "the messages use every placeholder")


def split_specials(
    text: str, specials: Mapping[str, SpecialToken], finder: re.Pattern[str] | None
) -> list[str | int]:
    """`text` split at its special tokens as llama.cpp splits it when parsing specials:
    the longest spelling first, whitespace swallowed beside lstrip/rstrip tokens."""
    present = {m.group(0) for m in finder.finditer(text)} if finder is not None else set()
    pieces: list[str | int] = [text]
    for spelling in sorted(present, key=len, reverse=True):
        token = specials[spelling]
        split: list[str | int] = []
        for piece in pieces:
            if isinstance(piece, int):
                split.append(piece)
                continue
            parts = piece.split(spelling)
            for index, part in enumerate(parts):
                if index < len(parts) - 1 and token.lstrip:
                    part = part.rstrip(_C_SPACE)
                if index > 0 and token.rstrip:
                    part = part.lstrip(_C_SPACE)
                if index > 0:
                    split.append(token.id)
                split.append(part)
        pieces = split
    return [piece for piece in pieces if piece != ""]


def _restored(
    piece: str, restore: re.Pattern[str], pasted: list[str], specials: Mapping[str, SpecialToken]
) -> list[str]:
    """The stretches of text to tokenize for one piece, pasted markers put back; a marker
    the vocabulary parses even as text is cut after its first character."""
    stretches = [""]
    for index, part in enumerate(restore.split(piece)):
        if index % 2 == 0:
            stretches[-1] += part
            continue
        spelling = pasted[int(part)]
        token = specials.get(spelling)
        if token is not None and not token.control:
            stretches[-1] += spelling[0]
            stretches.append(spelling[1:])
        else:
            stretches[-1] += spelling
    return [s for s in stretches if s]
