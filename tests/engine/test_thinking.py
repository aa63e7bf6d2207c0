"""engine/templates/thinking.py: thinking told apart from the reply, whole and streamed, for
the markers the publishers' templates write."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from specchat.engine.templates.thinking import (
    KNOWN_MARKERS,
    Part,
    ThinkingMarkers,
    ThinkingStream,
    opens_inside,
    split_thinking,
    thinking_markers,
)
from tests.helpers.vendored_llama import llama_source

QWEN = ThinkingMarkers("<think>", "</think>")
GEMMA = ThinkingMarkers("<|channel>thought", "<channel|>")


def test_the_publishers_templates_name_their_markers_and_where_answers_start() -> None:
    from specchat.engine.templates.chat_template import ChatTemplate

    templates = llama_source() / "models" / "templates"
    qwen = (templates / "Qwen3.5-4B.jinja").read_text("utf-8")
    gemma = (templates / "google-gemma-4-31B-it.jinja").read_text("utf-8")
    assert thinking_markers(qwen) == QWEN
    assert thinking_markers(gemma) == GEMMA
    assert thinking_markers("{{ messages[0].content }}") is None
    asked = [{"role": "user", "content": "hi"}]
    qwen_prompt = ChatTemplate(qwen).render(asked)
    assert opens_inside(qwen_prompt, QWEN)
    no_think = ChatTemplate(qwen).render(asked, extra={"enable_thinking": False})
    assert not opens_inside(no_think, QWEN)
    gemma_template = ChatTemplate(gemma)
    assert not opens_inside(gemma_template.render(asked), GEMMA)
    assert not opens_inside(gemma_template.render(asked, extra={"enable_thinking": True}), GEMMA)


def test_a_whole_answer_splits_into_thinking_and_reply() -> None:
    assert split_thinking("plan it\n</think>\n\nDone.", inside=QWEN) == ("plan it\n", "\n\nDone.")
    assert split_thinking("<|channel>thought\nhmm<channel|>Yes.") == ("\nhmm", "Yes.")
    assert split_thinking("  <think>a</think>b") == ("a", "b")
    # a marker's text inside the reply is the reply's own
    assert split_thinking("Use <think> tags.") == ("", "Use <think> tags.")
    assert split_thinking("x</think>y</think>z", inside=QWEN) == ("x", "y</think>z")
    assert split_thinking("<think>a</think>b", ()) == ("", "<think>a</think>b")
    # an answer cut inside its thinking, or inside its opening marker
    assert split_thinking("<think>still going") == ("still going", "")
    assert split_thinking("<thi") == ("", "<thi")


@given(
    thinking=st.text(alphabet="ab<>/\n tk", max_size=30).filter(lambda t: "</think>" not in t),
    reply=st.text(alphabet="ab<>/\n thk", max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8),
    inside=st.booleans(),
)
def test_streamed_pieces_add_up_to_the_whole_split(
    thinking: str, reply: str, cuts: list[int], inside: bool
) -> None:
    text = ("" if inside else "<think>") + thinking + "</think>" + reply
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    stream: ThinkingStream[int] = ThinkingStream(inside=QWEN if inside else None)
    pieces = []
    for n, (start, end) in enumerate(itertools.pairwise(bounds)):
        pieces += stream.feed(text[start:end], n)
    pieces += stream.finish()
    assert "".join(p.text for p in pieces) == text
    assert "".join(p.text for p in pieces if p.part is Part.THINKING) == thinking
    assert "".join(p.text for p in pieces if p.part is Part.ANSWER) == reply
    assert [p.payload for p in pieces] == sorted(p.payload for p in pieces)


def test_every_known_family_has_distinct_markers() -> None:
    assert len({m.open for m in KNOWN_MARKERS}) == len(KNOWN_MARKERS)


def test_later_turns_get_earlier_thinking_apart_and_qwen35_drops_it(tmp_path: Path) -> None:
    from specchat.engine.templates.chat_template import ChatTemplate
    from specchat.store.conversations import ConversationStore
    from specchat.ui.answer import chat_history

    with ConversationStore(tmp_path / "chats.db") as store:
        chat = store.create("Thinking")
        store.add_message(chat.id, "user", "Is 91 prime?")
        store.add_message(chat.id, "assistant", "<think>\n91 = 7 × 13\n</think>\n\nNo.")
        store.add_message(chat.id, "user", "And 97?")
        history = chat_history(store.messages(chat.id))
    answer = history[1]
    assert (answer.content, answer.reasoning_content) == ("No.", "91 = 7 × 13")
    qwen = (llama_source() / "models" / "templates" / "Qwen3.5-4B.jinja").read_text("utf-8")
    prompt = ChatTemplate(qwen).render(history)
    assert "7 × 13" not in prompt  # the publisher's template drops an earlier turn's thinking
    assert "<|im_start|>assistant\nNo.<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")


def test_the_api_readers_think_in_the_windows_markers() -> None:
    """One table of markers: every thinking syntax the API's readers use opens and closes
    with a pair the window and the exports know, so both tell the same thinking apart."""
    from specchat.host.answer_format import formats
    from specchat.host.answer_format.thinking import ThinkingSyntax

    syntaxes = [v for v in vars(formats).values() if isinstance(v, ThinkingSyntax)]
    assert len(syntaxes) >= 8
    known = {(m.open, m.close) for m in KNOWN_MARKERS}
    assert {(s.start, s.ends[0]) for s in syntaxes} <= known
    assert split_thinking("[THINK]plan[/THINK]Done.") == ("plan", "Done.")
