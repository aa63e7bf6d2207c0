"""An answer's kept draft tokens counted by source, from real rounds."""

from __future__ import annotations

from collections import Counter

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.kept_sources import (
    KeptSource,
    KeptSources,
    kept_summary,
    round_source,
)
from specchat.engine.drafting import SuffixDrafter
from specchat.engine.suffix.index import Source
from specchat.engine.types import TokenKind
from tests.helpers.engine import CHAT_PROMPTS, Run, run


def _counted(answer: Run) -> KeptSources:
    kept = KeptSources()
    for result in answer.rounds:
        kept.add(result)
    return kept


def test_an_earlier_chat_and_this_chat_are_told_apart(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    suffix = decoder.drafters["suffix"]
    assert isinstance(suffix, SuffixDrafter)
    index = suffix.index
    index.reset_chat()
    index.put("earlier", [*prompt, *plain.tokens])
    assert index.wait_idle(timeout=30)
    try:
        first = run(decoder, prompt, mode="suffix", k=8, max_tokens=60)
        again = run(decoder, prompt, mode="suffix", k=8, max_tokens=60)  # a regenerate
    finally:
        index.drop("earlier")
    for answer in (first, again):
        counts = _counted(answer).counts()
        # Every kept token is counted once, under the source its round drafted from.
        kept = [e for e in answer.events if e.kind == TokenKind.ACCEPTED]
        assert sum(c.tokens for c in counts) == answer.rounds[-1].stats.accepted == len(kept)
        by_origin = Counter(e.origin.removeprefix("an ") for e in kept)
        assert {c.source: c.tokens for c in counts} == dict(by_origin)
        assert [c.tokens for c in counts] == sorted((c.tokens for c in counts), reverse=True)
    assert {c.source for c in _counted(first).counts()} >= {"earlier chat"}
    assert Source.HISTORY.value == "an earlier chat" and Source.CHAT.value == "this chat"
    assert "this chat" in {c.source for c in _counted(again).counts()}


def test_a_drafter_that_does_not_copy_is_named(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    for mode, name in (("draft", "draft model"), ("lookup", "prompt lookup")):
        answer = run(decoder, prompt, mode=mode, k=4, max_tokens=40)
        counts = _counted(answer).counts()
        accepted = answer.rounds[-1].stats.accepted
        assert accepted > 0, mode
        assert counts == (KeptSource(name, accepted),)
        assert kept_summary(counts) == f"{name} {accepted}"
    assert round_source(answer.rounds[0]) == "prompt lookup"


def test_nothing_kept_is_a_dash(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[2])
    answer = run(decoder, prompt, mode="plain", max_tokens=20)
    assert _counted(answer).counts() == ()
    assert kept_summary(()) == "—"
    several = (KeptSource("this chat", 41), KeptSource("earlier chat", 23))
    assert kept_summary(several) == "this chat 41 · earlier chat 23"
