"""Earlier conversations from a real store, kept in step in the suffix index."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from specchat.engine.history import StoredHistory, Tokenize, template_tokenizer
from specchat.engine.said import SaidIndex
from specchat.engine.suffix.index import Source, SuffixIndex
from specchat.engine.types import SpecialToken
from specchat.store.conversations import ConversationStore, StoredMessage


def byte_tokens(messages: Sequence[StoredMessage]) -> list[int]:
    """Bytes as tokens: enough to find text again, and no model needed."""
    return list("".join(f"<{m.role}>{m.content}" for m in messages).encode())


def tokens(text: str) -> list[int]:
    return list(text.encode())


class ByteVocabulary:
    """A vocabulary of bytes, without special tokens."""

    def tokenize(self, text: str, *, add_special: bool = False, parse_special: bool = True):
        return tokens(text)

    def special_tokens(self) -> dict[str, SpecialToken]:
        return {}


def proposed(index: SuffixIndex, ending: str, k: int = 12) -> str:
    index.prepare(tokens(ending))
    found = index.propose(k, min_match=4)
    return bytes(found[0].tokens).decode(errors="replace") if found else ""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "chats.db") as opened:
        yield opened


@pytest.fixture
def index() -> Iterator[SuffixIndex]:
    built = SuffixIndex()
    yield built
    built.close()


def start(
    store: ConversationStore, index: SuffixIndex, tokenize: Tokenize = byte_tokens
) -> StoredHistory:
    history = StoredHistory(store, SaidIndex(index), tokenize)
    history.start()
    assert history.wait_idle(timeout=30)
    return history


def test_earlier_conversations_are_loaded_and_proposed(
    store: ConversationStore, index: SuffixIndex
) -> None:
    chat = store.create("a")
    store.add_message(chat.id, "user", "what is the capital of France")
    store.add_message(chat.id, "assistant", "The capital of France is Paris.")
    history = start(store, index)
    try:
        assert proposed(index, "<assistant>The capital of") == " France is P"
        assert index.propose(3)[0].source is Source.HISTORY
    finally:
        history.close()


def test_messages_saved_later_are_indexed(store: ConversationStore, index: SuffixIndex) -> None:
    history = start(store, index)
    try:
        chat = store.create("b")
        store.add_message(chat.id, "user", "list the planets")
        answer = store.begin_assistant_message(chat.id)
        store.update_partial(answer.id, "Mercury, Ven")
        assert history.wait_idle(timeout=30)
        # An unfinished answer is never drawn on.
        assert proposed(index, "<assistant>Mercury") == ""
        store.finish_message(answer.id, "Mercury, Venus, Earth, Mars")
        assert history.wait_idle(timeout=30)
        assert proposed(index, "<assistant>Mercury") == ", Venus, Ear"
    finally:
        history.close()


def test_a_deleted_conversation_is_never_proposed_again(
    store: ConversationStore, index: SuffixIndex
) -> None:
    secret = store.create("secret")
    store.add_message(secret.id, "user", "my password is hunter2-swordfish")
    kept = store.create("kept")
    store.add_message(kept.id, "user", "the weather is mild and sunny")
    history = start(store, index)
    try:
        assert proposed(index, "password is") == " hunter2-swo"
        store.delete(secret.id)
        # At once, before any background work, and after it.
        assert proposed(index, "password is") == ""
        assert history.wait_idle(timeout=30)
        assert proposed(index, "password is") == ""
        assert proposed(index, "weather is") == " mild and su"
        store.restore(secret.id)
        assert history.wait_idle(timeout=30)
        assert proposed(index, "password is") == " hunter2-swo"
    finally:
        history.close()


def test_a_conversation_deleted_while_it_loads_never_comes_back(
    store: ConversationStore, index: SuffixIndex
) -> None:
    secret = store.create("secret")
    store.add_message(secret.id, "user", "my password is hunter2-swordfish")

    def tokenize_then_delete(messages: Sequence[StoredMessage]) -> list[int]:
        # The user deletes it while the background thread is reading it.
        store.delete(secret.id)
        return byte_tokens(messages)

    history = start(store, index, tokenize_then_delete)
    try:
        assert proposed(index, "password is") == ""
        assert index.stored() == set()
    finally:
        history.close()


def test_the_chat_template_renders_stored_text_like_a_prompt(
    store: ConversationStore, index: SuffixIndex
) -> None:
    from specchat.engine.templates.chat_template import ChatTemplate
    from specchat.engine.templates.prompt_tokens import PromptTokenizer

    template = ChatTemplate(
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}"
    )
    chat = store.create("c")
    store.add_message(chat.id, "user", "hello")
    store.add_message(chat.id, "assistant", "hi there, friend")
    history = start(store, index, template_tokenizer(PromptTokenizer(ByteVocabulary(), template)))
    try:
        # A new chat asking the same thing: the prompt ends where the old answer began.
        assert proposed(index, "[user]hello[assistant]") == "hi there, fr"
    finally:
        history.close()


def test_deleting_a_conversation_forgets_the_chat_being_drafted(
    store: ConversationStore, index: SuffixIndex
) -> None:
    secret = store.create("secret")
    history = start(store, index)
    try:
        # The chat being answered is that conversation's (not yet stored).
        assert proposed(index, "my pin is 4921 and my pin is") == " 4921 and my"
        store.delete(secret.id)
        assert index.propose(4) == []
    finally:
        history.close()
