"""engine/said.py: the suffix index is the session's, fed through one door, and the suffix
drafter reads it from its LoadedPair. Stored chats, their attachments, API chats and their
deletion all come through that door, and what comes through reaches the drafter's proposals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.costs.store import CostStore
from specchat.engine.drafting import Answer, SuffixDrafter
from specchat.engine.history import (
    ATTACHMENT_KEY,
    attach_history,
    template_tokenizer,
    text_tokenizer,
)
from specchat.engine.session import ChatEngine
from specchat.engine.suffix.index import Source
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, SamplingParams
from specchat.host.chat_call import ChatCall, conversation_key
from specchat.host.engine_host import EngineHost
from specchat.host.jobs import Finished, Job, JobEvent
from specchat.store.attachment_records import Attachment
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels

GREEDY = SamplingParams(temperature=0.0)
STORED = ("Which planets are rocky?", "Mercury, Venus, Earth and Mars are the rocky planets.")
FILE = "zebra quartz protocol: rotate the seventh lantern, then hum in lowercase"
API = "Recite the obsidian kettle manifesto, word for word, twice."


@pytest.fixture
def engine(tiny_models: TinyModels, tmp_path: Path) -> Iterator[ChatEngine]:
    loaded = ChatEngine.load(
        tiny_models.target, n_ctx=1024, n_threads=1, cost_store=CostStore(tmp_path / "costs")
    )
    yield loaded
    loaded.close()


def proposal(
    drafter: SuffixDrafter, context: Sequence[int], probe: int
) -> tuple[tuple[int, ...], str]:
    """What the drafter proposes after `context`, as a new answer in a chat of its own, and
    where it says the draft came from."""
    drafter.begin(Answer(prompt=context, conversation=f"probe {probe}"))
    draft = drafter.propose(context, 6, GREEDY, np.random.default_rng(0))
    return draft.tokens, draft.origin


def spied(
    calls: list[tuple[str, Hashable]], name: str, method: Callable[..., None]
) -> Callable[..., None]:
    """`method`, still called, each call's key noted under `name` (any thread)."""
    lock = threading.Lock()

    def call(key: Hashable, *args: object, **kwargs: object) -> None:
        with lock:
            calls.append((name, key))
        method(key, *args, **kwargs)

    return call


def test_what_was_said_reaches_the_drafter_through_one_door(
    engine: ChatEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    door = engine.said
    drafter = engine.decoder.drafters["suffix"]
    assert isinstance(drafter, SuffixDrafter)
    # Given to the drafter in its context, not found on it.
    assert engine.decoder.drafters.pair.index is door.index and drafter.index is door.index
    # Every document the index takes or drops must have come through the door.
    through: list[tuple[str, Hashable]] = []
    taken: list[tuple[str, Hashable]] = []
    for name in ("chat", "attachment", "drop"):
        monkeypatch.setattr(door, name, spied(through, name, getattr(door, name)))
    monkeypatch.setattr(door.index, "put", spied(taken, "put", door.index.put))
    monkeypatch.setattr(door.index, "drop", spied(taken, "drop", door.index.drop))

    with ConversationStore(tmp_path / "chats.db") as store:
        # A stored chat, with a file attached to its last message.
        stored = store.create("earlier")
        store.add_message(stored.id, "user", STORED[0])
        store.add_message(stored.id, "assistant", STORED[1])
        attached = (Attachment("a.txt", FILE),)
        message = store.add_message(stored.id, "user", "keep this", attachments=attached)
        history = attach_history(store, engine)
        assert history is not None and history.wait_idle(timeout=60)
        # An API chat, answered on the host; the next chat files it as an earlier one.
        host = EngineHost(engine, profile=False)
        host.start()
        api_tokens: tuple[int, ...] = ()
        for question in (API, "Something else entirely."):
            events: list[JobEvent] = []
            call = ChatCall("m", (ChatMessage("user", question),), 8, Controls("plain", 0, GREEDY))
            host.submit(Job(call, deliver=events.append))
            assert host.step() and isinstance(events[-1], Finished)
            api_tokens = api_tokens or tuple(engine.target.tokens)
        assert door.wait_idle(timeout=60)

        api_key = ("api", conversation_key([ChatMessage("user", API)]))
        file_key = (ATTACHMENT_KEY, message.id, 0)
        assert ("chat", stored.id) in through and ("attachment", file_key) in through
        assert ("chat", api_key) in through
        chat_tokens = template_tokenizer(engine.prompt_tokens)(store.messages(stored.id))
        file_tokens = text_tokenizer(engine)(FILE)
        # Each reaches the drafter's proposals, named by where it was said.
        probes = {
            Source.HISTORY: chat_tokens,
            Source.ATTACHMENT: file_tokens,
            "api": api_tokens,
        }
        cut = {source: len(tokens) // 2 for source, tokens in probes.items()}
        for number, (source, tokens) in enumerate(probes.items()):
            drafted, origin = proposal(drafter, tokens[: cut[source]], number)
            assert drafted and tuple(tokens[cut[source] :][: len(drafted)]) == drafted, source
            assert origin == (Source.HISTORY if source == "api" else source).value, source

        # Deleting the conversation drops it and its file, through the door.
        store.delete(stored.id)
        assert ("drop", stored.id) in through and ("drop", file_key) in through
        for number, source in enumerate((Source.HISTORY, Source.ATTACHMENT), start=10):
            tokens = probes[source]
            drafted, origin = proposal(drafter, tokens[: cut[source]], number)
            assert origin != source.value, source
        drafted, _ = proposal(drafter, api_tokens[: cut["api"]], 20)
        assert drafted  # the API chat was not deleted
        history.close()
    # Nothing reached the index but through the door.
    assert sorted(map(str, taken)) == sorted(
        str(("drop" if name == "drop" else "put", key)) for name, key in through
    )
