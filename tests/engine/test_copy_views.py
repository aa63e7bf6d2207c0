"""A copy source's views (engine/drafting/copies/views.py): its text respelled as a JSON
string's inside or with its escapes read back, tokenized again by the target's tokenizer,
and the copy found in one spelling and proposed in the other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.drafting.copies.views import (
    Quoting,
    Spelling,
    Views,
    escaped,
    text_of,
    unescaped,
    views_of,
)
from specchat.engine.llamacpp.model import LlamaModel

FILE = 'def greet(name):\n    print("hi", name)\n\treturn name\n'


def test_escaped_is_a_json_strings_inside_and_unescaped_reads_it_back() -> None:
    for text in (FILE, 'path = "C:\\\\tmp"\n'):
        assert escaped(text) == json.dumps(text)[1:-1]
        assert unescaped(escaped(text)) == text
    assert unescaped("caf\\u00e9 \\/ x") == "café / x"
    assert unescaped("no escapes") == "no escapes"


@pytest.fixture(scope="module")
def target(real_pair: tuple[Path, Path]) -> Iterator[LlamaModel]:
    model = LlamaModel(real_pair[0], n_ctx=256)
    yield model
    model.close()


def tokens(target: LlamaModel, text: str) -> list[int]:
    return target.tokenize(text, add_special=False, parse_special=False)


@pytest.mark.real_model
def test_a_views_tokens_are_the_respelled_text_in_the_targets_tokens(target: LlamaModel) -> None:
    raw = tokens(target, FILE)
    (view,) = views_of(raw, target)  # the raw file holds no JSON escapes to read back
    assert view.spelling is Spelling.ESCAPED
    assert list(view.listed) == tokens(target, escaped(FILE))
    assert text_of(view.listed, target) == escaped(FILE)
    # The escaped text's own views: itself escaped again, and the raw file read back.
    views = {v.spelling: v for v in views_of(view.listed, target)}
    assert text_of(views[Spelling.UNESCAPED].listed, target) == FILE
    assert list(views[Spelling.UNESCAPED].listed) == raw


@pytest.mark.real_model
def test_quoting_follows_a_json_string_through_its_escapes(target: LlamaModel) -> None:
    prompt = tokens(target, "Write it back.")
    quoting = Quoting()
    quoting.restart(len(prompt))
    call = '{"name": "write", "arguments": {"content": "print(\\"hi\\")'
    assert quoting.follow([*prompt, *tokens(target, call)], target)
    assert not quoting.follow([*prompt, *tokens(target, call + '"}}')], target)
    # A line break inside the string: the answer writes what it quotes raw, unescaped.
    quoting.restart(len(prompt))
    raw = '{"name": "write", "arguments": {"content": "def f():\n    return'
    assert not quoting.follow([*prompt, *tokens(target, raw)], target)
    # Quotes outside an object are text, not a string's start.
    quoting.restart(len(prompt))
    assert not quoting.follow([*prompt, *tokens(target, 'He said "hi')], target)


@pytest.mark.real_model
def test_a_copy_is_found_in_one_spelling_and_proposed_in_the_other(target: LlamaModel) -> None:
    prompt = tokens(target, f"Here is greet.py:\n{FILE}\nWrite it back.")
    views = Views(target)
    views.begin(prompt, len(prompt))
    answer = tokens(target, '{"content": "' + escaped(FILE)[:30])
    copy = views.find([*prompt, *answer], 12, 64, 0, views.fork())
    assert copy is not None and copy.spelling is Spelling.ESCAPED
    rest = text_of(copy.tokens, target)
    # The prompt's text, as a JSON string would hold it, from where the answer is.
    assert escaped(f"{FILE}\nWrite it back.")[30:].startswith(rest), rest
    assert "\\n" in rest and "\n" not in rest
    # A longer match of the drafter's own (the raw text) is left to it.
    assert views.find([*prompt, *answer], 12, 64, copy.match_len + 1, views.fork()) is None
    # The reverse: the source holds the file escaped (a JSON tool result), the answer
    # writes it raw.
    source = tokens(target, json.dumps({"content": FILE}))
    views.begin(source, len(source))
    answer = tokens(target, "```python\n" + FILE[:30])
    copy = views.find([*source, *answer], 12, 64, 0, views.fork())
    assert copy is not None and copy.spelling is Spelling.UNESCAPED
    assert f'{FILE}"}}'[30:].startswith(text_of(copy.tokens, target))


def test_no_tokenizer_no_views() -> None:
    views = Views(None)
    views.begin([1, 2, 3], 3)
    assert views.views == () and views.find([1, 2, 3, 1, 2], 4, 64, 0, views.fork()) is None


RENAMED = (
    "class Ledger:\n"
    '    """Payments in the order they were made."""\n'
    "\n"
    "    def __init__(self):\n"
    "        self.payments = []\n"
    "\n"
    "\n"
    "def trip():\n"
    '    """A Ledger of a weekend away."""\n'
    "    book = Ledger()\n"
    "    book.payments.append(90)\n"
    "    return book\n"
)


@pytest.mark.real_model
def test_a_views_copy_is_carried_through_a_rename(target: LlamaModel) -> None:
    """A class renamed where a long copy meets it (inside a JSON string) is proposed renamed
    at its next occurrence: the copy of the escaped view follows the rename."""
    prompt = tokens(target, f"Here is ledger.py:\n{RENAMED}\nRename Ledger to Journal.")
    views = Views(target)
    views.begin(prompt, len(prompt))
    call = '{"content": "' + escaped(RENAMED.replace("Ledger", "Journal"))
    before = call[: call.index("book = Journal") + len("book =")]
    text = [*prompt]
    for token in tokens(target, call):
        copy = views.find(text, 8, 64, 0, views.followed)
        if text_of(text[len(prompt) :], target) == before:
            assert copy is not None
            assert text_of(copy.tokens, target).lstrip().startswith("Journal()"), copy
            return
        text.append(token)
    raise AssertionError("the answer never reached the second occurrence")
