"""engine/templates/thinking.py's one table of markers, and thinking told apart as the answer's
reader reads it token by token (AnswerReader.read_token), whole and streamed."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from specchat.engine.templates.thinking import KNOWN_MARKERS
from specchat.host.answer_format.formats import format_of
from specchat.host.answer_format.reader import AnswerReader
from tests.helpers.vendored_llama import llama_source


def _template(name: str) -> str:
    return (llama_source() / "models" / "templates" / name).read_text("utf-8")


def _tags(template: str, tokens: list[str], *, prompt_part: str = "") -> list[str]:
    """Each token read: "t" thinking, "m" its markup, "" reply."""
    reader = AnswerReader(format_of(template), thinking_prompt=prompt_part)
    tags = []
    for token in tokens:
        read = reader.read_token(token)
        tags.append("m" if read.markup else "t" if read.thinking else "")
    return tags


def test_tokens_are_thinking_before_or_after_and_markers_are_markup() -> None:
    qwen = _template("Qwen3.5-4B.jinja")
    # Qwen3.5's generation prompt opens the thinking: the answer starts inside it
    tokens = ["plan", " it", "\n", "</think>", "\n\n", "Done", "."]
    assert _tags(qwen, tokens, prompt_part="<think>\n") == ["t", "t", "t", "m", "", "", ""]
    assert _tags(qwen, ["<think>", "a", "</think>", "b"]) == ["m", "t", "m", ""]
    # a marker's text inside the reply is the reply's own
    assert _tags(qwen, ["Use", " <think>", " tags", "."]) == ["", "", "", ""]
    gemma = _template("google-gemma-4-31B-it.jinja")
    tags = _tags(gemma, ["<|channel>", "thought", "\n", "hmm", "<channel|>", "Yes"])
    assert tags == ["m", "m", "t", "t", "m", ""]


@given(
    thinking=st.text(alphabet="ab<>/\n tk", max_size=30).filter(
        lambda t: "</think>" not in t and not t.startswith("\n")
    ),
    reply=st.text(alphabet="abhk ", min_size=1, max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8),
)
def test_streamed_tags_cover_the_thinking_however_cut(
    thinking: str, reply: str, cuts: list[int]
) -> None:
    text = thinking + "</think>" + reply
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    tokens = [text[a:b] for a, b in itertools.pairwise(bounds)]
    tags = _tags(_template("Qwen3.5-4B.jinja"), tokens, prompt_part="<think>\n")
    tagged = "".join(t for t, tag in zip(tokens, tags, strict=True) if tag)
    untagged = "".join(t for t, tag in zip(tokens, tags, strict=True) if not tag)
    # before-or-after: every token holding thinking or its closing marker is tagged, and
    # only the reply's tokens are not
    assert thinking + "</think>" in tagged
    assert reply.endswith(untagged)


def test_every_known_family_has_distinct_markers() -> None:
    assert len({m.open for m in KNOWN_MARKERS}) == len(KNOWN_MARKERS)


def test_later_turns_get_earlier_thinking_apart_and_qwen35_drops_it(tmp_path: Path) -> None:
    from specchat.engine.templates.chat_template import ChatTemplate
    from specchat.store.conversations import ConversationStore
    from specchat.ui.chat.answer import chat_history

    tokens = [
        ["\n91 = 7 × 13\n", "PLAIN", "thinking"],
        ["</think>", "PLAIN", "markup"],
        ["\n\n", "PLAIN"],
        ["No.", "ACCEPTED"],
    ]
    with ConversationStore(tmp_path / "chats.db") as store:
        chat = store.create("Thinking")
        store.add_message(chat.id, "user", "Is 91 prime?")
        content = "".join(t[0] for t in tokens)
        store.add_message(chat.id, "assistant", content, token_kinds=tokens)
        store.add_message(chat.id, "assistant", "Plain.")  # no tags: all reply
        store.add_message(chat.id, "user", "And 97?")
        history = chat_history(store.messages(chat.id))
    answer = history[1]
    assert (answer.content, answer.reasoning_content) == ("No.", "91 = 7 × 13")
    assert (history[2].content, history[2].reasoning_content) == ("Plain.", "")
    qwen = _template("Qwen3.5-4B.jinja")
    prompt = ChatTemplate(qwen).render([history[0], history[1], history[3]])
    assert "7 × 13" not in prompt  # the publisher's template drops an earlier turn's thinking
    assert "<|im_start|>assistant\nNo.<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")


def test_the_api_readers_think_in_the_tables_markers() -> None:
    """One table of markers: every thinking syntax the readers use opens and closes with a
    pair of it."""
    from specchat.host.answer_format import formats
    from specchat.host.answer_format.thinking_splitter import ThinkingSyntax

    syntaxes = [v for v in vars(formats).values() if isinstance(v, ThinkingSyntax)]
    assert len(syntaxes) >= 8
    known = {(m.open, m.close) for m in KNOWN_MARKERS}
    assert {(s.start, s.ends[0]) for s in syntaxes} <= known
