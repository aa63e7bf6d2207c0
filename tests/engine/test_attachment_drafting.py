"""Attachments as drafting documents: indexed from the store, forgotten when erased, and
drafted from with exact output (greedy identity, the sampling law)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.history import ATTACHMENT_KEY, StoredHistory
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.said import SaidIndex
from specchat.engine.suffix.index import Source, SuffixIndex
from specchat.engine.types import TokenKind
from specchat.store.attachment_records import Attachment
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels
from tests.engine.test_history import byte_tokens, proposed, tokens
from tests.helpers.engine import CHAT_PROMPTS, run

SECRET = Attachment("keys.txt", "the vault code is 7741-alpha-omega\n")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "chats.db") as opened:
        yield opened


@pytest.fixture
def index() -> Iterator[SuffixIndex]:
    built = SuffixIndex()
    yield built
    built.close()


def start(store: ConversationStore, index: SuffixIndex) -> StoredHistory:
    history = StoredHistory(store, SaidIndex(index), byte_tokens, tokenize_text=tokens)
    history.start()
    assert history.wait_idle(timeout=30)
    return history


def test_each_attachment_is_a_document_of_its_own(
    store: ConversationStore, index: SuffixIndex
) -> None:
    chat = store.create("c")
    message = store.add_message(chat.id, "user", "what is in it?", attachments=(SECRET,))
    history = start(store, index)
    try:
        assert index.stored() == {chat.id, (ATTACHMENT_KEY, message.id, 0)}
        assert proposed(index, "vault code is") == " 7741-alpha-"
        # The stored chat renders the typed text only: the file's text is the attachment's.
        assert index.propose(3)[0].source is Source.ATTACHMENT
    finally:
        history.close()


def test_an_erased_message_never_proposes_its_attachment_again(
    store: ConversationStore, index: SuffixIndex
) -> None:
    chat = store.create("c")
    store.add_message(chat.id, "user", "first question")
    message = store.add_message(chat.id, "user", "and this file?", attachments=(SECRET,))
    history = start(store, index)
    try:
        assert proposed(index, "vault code is") == " 7741-alpha-"
        store.delete_message(message.id)
        # At once, before any background work, and after it.
        assert proposed(index, "vault code is") == ""
        assert history.wait_idle(timeout=30)
        assert proposed(index, "vault code is") == ""
        assert index.stored() == {chat.id}
    finally:
        history.close()


def test_erasing_the_message_forgets_the_chat_that_held_the_file(
    store: ConversationStore, index: SuffixIndex
) -> None:
    chat = store.create("c")
    message = store.add_message(chat.id, "user", "see file", attachments=(SECRET,))
    history = start(store, index)
    try:
        # The prompt being answered held the file (as this chat's text).
        index.prepare(tokens(f"{SECRET.text} and again the vault code is"))
        assert index.propose(4, min_match=4)
        store.delete_message(message.id)
        assert index.propose(4) == []
    finally:
        history.close()


def test_a_deleted_conversation_never_proposes_its_attachments_again(
    store: ConversationStore, index: SuffixIndex
) -> None:
    chat = store.create("c")
    store.add_message(chat.id, "user", "see file", attachments=(SECRET,))
    history = start(store, index)
    try:
        assert proposed(index, "vault code is") == " 7741-alpha-"
        store.delete(chat.id)
        assert proposed(index, "vault code is") == ""
        assert history.wait_idle(timeout=30)
        assert proposed(index, "vault code is") == ""
        assert index.stored() == set()
        store.restore(chat.id)
        assert history.wait_idle(timeout=30)
        assert proposed(index, "vault code is") == " 7741-alpha-"
    finally:
        history.close()


def test_an_attachment_is_named_though_this_chats_prompt_holds_it_too() -> None:
    index = SuffixIndex(background=False)
    text = "def add(a, b):\n    return a + b\n"
    index.put("file", tokens(text), source=Source.ATTACHMENT)
    # The prompt holds the file under its name and fence, and the answer copies the fence
    # (a byte a token here: a fence of a few tokens, as a BPE vocabulary writes it).
    index.prepare(tokens(f"a.py\n```\n{text}```\nfix it<answer>```\ndef add(a"))
    found = index.propose(6)
    assert found[0].source is Source.ATTACHMENT
    assert bytes(found[0].tokens) == b", b):\n"
    # Priced as the pasted file would be: the match runs back through the fence.
    assert found[0].match_len == len("```\ndef add(a")
    # Text only this chat holds stays this chat's.
    index.prepare(tokens(f"{text} -- fix it<answer>fix it<ans"))
    assert index.propose(3)[0].source is Source.CHAT


# --- in the round loop -------------------------------------------------------------------


def test_greedy_answers_drafted_from_an_attachment_are_plain_ones(
    decoder: SpeculativeDecoder,
) -> None:
    """The attachment holds the answer (a file the answer copies): drafts from it are kept,
    named as the attachment's, and the output is exactly plain's."""
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    index = decoder.drafters.pair.index
    index.reset_chat()
    index.put("attached", [*prompt[-4:], *plain.tokens], source=Source.ATTACHMENT)
    assert index.wait_idle(timeout=30)
    try:
        for mode, k in (("suffix", 8), ("suffix", 3), ("auto", 4)):
            spec = run(decoder, prompt, mode=mode, k=k, max_tokens=60)
            assert spec.tokens == plain.tokens, (mode, k)
            index.reset_chat()  # each run drafts from the attachment, not the run before
        origins = Counter(e.origin for e in spec.events if e.kind == TokenKind.ACCEPTED)
        assert origins[Source.ATTACHMENT.value] > 10, origins
    finally:
        index.drop("attached")


def test_sampling_from_an_attachment_keeps_the_plain_law(tiny_models: TinyModels) -> None:
    """Chi-square as in test_sampling_law.py, T = 0.8, every draft copied from an attachment
    that holds the prompt and a greedy answer (kept at the target's odds, often refused)."""
    from tests.engine.test_sampling_law import SETTINGS, _answers, _padded, chi_square

    with LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as target:
        decoder = SpeculativeDecoder(LoadedPair.of(target))
        prompt = target.tokenize("the cat sat")
        greedy = run(decoder, prompt, mode="plain", max_tokens=12).tokens
        index = decoder.drafters.pair.index
        index.put("attached", [*prompt, *greedy, *prompt, *greedy], source=Source.ATTACHMENT)
        assert index.wait_idle(timeout=30)
        plain = _answers(decoder, prompt, "plain", SETTINGS["t0.8"])
        spec = _answers(decoder, prompt, "suffix", SETTINGS["t0.8"])
    kept = Counter(e.origin for a in spec for e in a.events if e.kind == TokenKind.ACCEPTED)
    drafted_from = Counter(
        e.origin for a in spec for r in a.rounds for e in r.events if r.drafted and e.origin
    )
    rejected = sum(
        any(e.kind == TokenKind.CORRECTED for e in r.events) for a in spec for r in a.rounds
    )
    assert kept[Source.ATTACHMENT.value] >= 200 and rejected >= 200, (kept, rejected)
    assert drafted_from[Source.ATTACHMENT.value] >= len(spec) // 2, drafted_from
    tests = [("tokens 1-2", lambda a: _padded(a)[:2])]
    tests += [(f"token {i + 1}", lambda a, i=i: _padded(a)[i]) for i in range(3)]
    for name, outcome in tests:
        statistic, threshold, bins = chi_square(
            Counter(outcome(a) for a in plain), Counter(outcome(a) for a in spec)
        )
        assert bins >= 5, name
        assert statistic < threshold, f"{name}: chi-square {statistic:.1f} ≥ {threshold:.1f}"
