"""The suffix automaton and the suffix index over chat, stored chats and attachments."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specchat.engine.suffix import index as suffix_index
from specchat.engine.suffix.automaton import SuffixAutomaton
from specchat.engine.suffix.index import Source, SuffixIndex


def occurs(needle: Sequence[int], docs: Sequence[Sequence[int]]) -> bool:
    n = len(needle)
    return any(
        list(doc[i : i + n]) == list(needle) for doc in docs for i in range(len(doc) - n + 1)
    )


def occurrences(needle: Sequence[int], docs: Sequence[Sequence[int]]) -> int:
    n = len(needle)
    return sum(
        list(doc[i : i + n]) == list(needle) for doc in docs for i in range(len(doc) - n + 1)
    )


# --- the automaton ------------------------------------------------------------------------------
def build(*docs: Sequence[int]) -> SuffixAutomaton:
    auto = SuffixAutomaton()
    for doc in docs:
        auto.start_document()
        auto.extend(doc)
    return auto


def test_every_substring_is_found_and_nothing_else() -> None:
    docs = [[1, 2, 3, 1, 2, 4], [2, 3, 5]]
    auto = build(*docs)
    for doc in docs:
        for i in range(len(doc)):
            for j in range(i + 1, len(doc) + 1):
                assert auto.contains(doc[i:j])
    # Spanning the boundary between documents is not a substring of either.
    assert not auto.contains([4, 2])
    assert not auto.contains([1, 2, 3, 5])
    assert not auto.contains([9])


def test_counts_are_occurrences_across_documents() -> None:
    docs = [[1, 2, 3, 1, 2, 4], [2, 3, 5], [1, 2, 3]]
    auto = build(*docs)
    for needle in ([1, 2], [2, 3], [2], [1, 2, 3], [3, 5], [4]):
        state, matched = auto.match(needle)
        assert matched == len(needle)
        assert auto.count(state) == occurrences(needle, docs), needle


def test_advance_keeps_the_longest_match_of_the_ending() -> None:
    auto = build([5, 6, 7, 8, 9])
    state, matched = 0, 0
    seen: list[int] = []
    for token in [1, 5, 6, 7, 2, 6, 7, 8]:
        seen.append(token)
        state, matched = auto.advance(state, matched, token)
        longest = max(
            (m for m in range(len(seen) + 1) if occurs(seen[len(seen) - m :], [[5, 6, 7, 8, 9]])),
        )
        assert matched == longest
    assert matched == 3  # [6, 7, 8]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=30), min_size=1, max_size=4))
def test_counts_match_brute_force(docs: list[list[int]]) -> None:
    auto = build(*docs)
    for doc in docs:
        for i in range(len(doc)):
            for j in range(i + 1, min(len(doc), i + 4) + 1):
                state, matched = auto.match(doc[i:j])
                assert matched == j - i
                # COUNT_DEPTH bounds the walk; these texts are far shorter than it.
                assert auto.count(state) == occurrences(doc[i:j], docs)


# --- the index ----------------------------------------------------------------------------------
def test_the_chat_proposes_what_followed_its_ending_before() -> None:
    index = SuffixIndex(background=False)
    index.prepare([10, 11, 12, 13, 14, 20, 21, 10, 11])
    [best] = index.propose(4)
    assert best.tokens == (12, 13, 14, 20)
    assert best.match_len == 2
    assert best.source is Source.CHAT
    assert best.shares == (1.0, 1.0, 1.0, 1.0)


def test_the_most_frequent_continuation_wins_and_the_runner_up_branches() -> None:
    index = SuffixIndex(background=False)
    # After [1, 2]: 3 twice, 4 once; after [1, 2, 3]: 7 once, then 8 once (more recent).
    index.prepare([1, 2, 3, 7, 1, 2, 3, 8, 1, 2, 4, 9, 1, 2])
    found = index.propose(2, branches=3)
    # Both branches are 1/3 likely (1/3 × 1 and 2/3 × 1/2): the earlier one first.
    assert [c.tokens for c in found] == [(3, 8), (4, 9), (3, 7)]
    assert found[0].counts == (2, 1) and found[0].shares == pytest.approx((2 / 3, 1 / 2))
    assert found[1].shares[0] == pytest.approx(1 / 3)
    assert [c.tokens for c in index.propose(2, branches=2)] == [(3, 8), (4, 9)]
    # After 3, 7 and 8 are tied: the tie is below a 0.6 share, so the walk stops there.
    assert index.propose(3, min_share=0.6)[0].tokens == (3,)


def test_appended_tokens_update_the_match() -> None:
    index = SuffixIndex(background=False)
    index.prepare([1, 2, 3, 4, 5, 9])
    assert index.propose(3) == []  # 9 never occurred before
    index.extend([2, 3])
    [best] = index.propose(3)
    assert best.tokens == (4, 5, 9) and best.match_len == 2


def test_a_regenerated_answer_is_proposed_from_the_earlier_one() -> None:
    index = SuffixIndex(background=False)
    prompt = [50, 51, 52]
    index.prepare(prompt)
    index.extend([60, 61, 62, 63])  # the first answer
    index.prepare(prompt)  # regenerate: the same prompt again
    [best] = index.propose(4)
    assert best.tokens == (60, 61, 62, 63)
    assert best.match_len == 3


def test_stored_documents_are_searched_and_the_longer_match_wins() -> None:
    index = SuffixIndex(background=False)
    index.put("old", [1, 2, 3, 4, 5, 6])
    index.put("file", [7, 3, 4, 8], source=Source.ATTACHMENT)
    index.prepare([9, 2, 3, 4])
    [best] = index.propose(2)
    assert best.tokens == (5, 6) and best.match_len == 3 and best.source is Source.HISTORY
    index.prepare([9, 7, 3, 4])
    [best] = index.propose(2)
    assert best.tokens == (8,) and best.source is Source.ATTACHMENT


def test_the_chat_wins_a_tie_with_history() -> None:
    index = SuffixIndex(background=False)
    index.put(1, [1, 2, 3])
    index.prepare([1, 2, 4, 5, 1, 2])
    [best] = index.propose(1)
    assert best.source is Source.CHAT and best.tokens == (4,)


def test_a_dropped_conversation_is_never_proposed() -> None:
    index = SuffixIndex(background=False, shard_tokens=1_000)
    secret = [1, 2, 3, 40, 41, 42]
    index.put("secret", secret)
    index.put("kept", [5, 6, 7, 8])
    index.prepare([9, 1, 2, 3])
    assert index.propose(3)[0].tokens == (40, 41, 42)
    index.drop("secret")
    assert index.propose(3) == []
    index.prepare([9, 5, 6])
    assert index.propose(2)[0].tokens == (7, 8)  # its shard neighbour came back, rebuilt
    assert "secret" not in index.stored()


def test_a_conversation_dropped_while_its_shard_is_built_never_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = SuffixIndex(background=False)
    real_shard = suffix_index._Shard

    def shard_then_drop(docs: Sequence[suffix_index._Doc]) -> suffix_index._Shard:
        built = real_shard(docs)
        if any(d.key == "secret" for d in docs):
            index.drop("secret")  # another thread deletes it mid-build
        return built

    monkeypatch.setattr(suffix_index, "_Shard", shard_then_drop)
    index.put("secret", [1, 2, 3, 40, 41])
    monkeypatch.setattr(suffix_index, "_Shard", real_shard)
    index.prepare([1, 2, 3])
    assert index.propose(2) == []
    assert index.stats().documents == 0


def test_replacing_a_document_forgets_its_old_text() -> None:
    index = SuffixIndex(background=False)
    index.put(1, [1, 2, 3, 40])
    index.put(1, [1, 2, 3, 50])
    index.prepare([1, 2, 3])
    [best] = index.propose(1)
    assert best.tokens == (50,)


def test_the_oldest_documents_are_evicted_past_the_cap() -> None:
    index = SuffixIndex(background=False, max_stored_tokens=10)
    index.put("old", [1, 2, 3, 4, 5], order=1.0)
    index.put("mid", [6, 7, 8, 9], order=2.0)
    index.put("new", [10, 11, 12], order=3.0)
    assert index.stored() == {"mid", "new"}
    assert index.stats().stored_tokens == 7
    index.prepare([1, 2])
    assert index.propose(2) == []


def test_a_shard_published_mid_answer_matches_the_text_so_far() -> None:
    index = SuffixIndex(background=False)
    index.prepare([7, 8, 1, 2])
    index.put(1, [1, 2, 3])
    [best] = index.propose(1)
    assert best.tokens == (3,) and best.match_len == 2


def test_background_building_does_the_same() -> None:
    index = SuffixIndex()
    try:
        for key in range(20):
            index.put(key, [key, 100 + key, 200 + key])
        assert index.wait_idle(timeout=30)
        index.prepare([7, 107])
        assert index.propose(1)[0].tokens == (207,)
        index.drop(7)
        assert index.propose(1) == []
        assert index.wait_idle(timeout=30)
        assert index.propose(1) == []
        assert index.stats().documents == 19
    finally:
        index.close()


_tokens = st.lists(st.integers(0, 5), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    stored=st.lists(_tokens, max_size=3),
    chat=st.lists(_tokens, min_size=1, max_size=3),
    k=st.integers(1, 6),
    branches=st.integers(1, 3),
)
def test_proposals_are_real_continuations_of_the_matched_ending(
    stored: list[list[int]], chat: list[list[int]], k: int, branches: int
) -> None:
    """Whatever is indexed, every proposal is text that followed the text's ending before."""
    index = SuffixIndex(background=False, shard_tokens=50)
    for key, doc in enumerate(stored):
        index.put(key, doc)
    said: list[int] = []
    before: list[list[int]] = []  # texts this chat held before (regenerated answers included)
    # Each prompt either extends the text or departs from it (a regenerate, an edit).
    for part in chat:
        if said and part[0] % 2:
            before.append(said)
            said = said[: len(said) // 2] + part
        else:
            said = said + part
        index.prepare(said)
        for c in index.propose(k, branches=branches, min_share=0.0):
            assert 1 <= len(c.tokens) <= k
            assert 1 <= c.match_len <= len(said)
            ending = said[len(said) - c.match_len :]
            found = ending + list(c.tokens)
            if c.source is Source.CHAT:
                # Earlier in this chat: in a text it held before, or after an occurrence of the
                # ending that is not the ending itself (which has nothing after it yet).
                n = len(found)
                assert occurs(found, before) or any(
                    said[i : i + n] == found for i in range(len(said) - len(ending))
                ), (ending, c)
            else:
                assert occurs(found, stored), (ending, c)
            assert len(c.counts) == len(c.shares) == len(c.tokens)
        index.extend(part[:2])
        said = said + part[:2]


def test_documents_arriving_one_by_one_fill_few_shards() -> None:
    index = SuffixIndex(background=False, shard_tokens=100)
    for key in range(100):
        index.put(key, [1000 + key, *range(9)])
    stats = index.stats()
    assert stats.documents == 100 and stats.pending == 0
    assert stats.shards <= 1000 // 100 + 1
    index.prepare([1042, 0, 1])
    assert index.propose(2)[0].tokens == (2, 3)
    with index.deferred():
        for key in range(100, 150):
            index.put(key, [1000 + key, 5])
        assert index.stats().pending == 50  # nothing built until the batch ends
    assert index.stats().pending == 0


def test_forget_chat_stops_proposals_from_this_chat() -> None:
    index = SuffixIndex(background=False)
    index.prepare([1, 2, 3, 4, 1, 2])
    assert index.propose(2)[0].tokens == (3, 4)
    index.forget_chat()  # another thread: the conversation was deleted
    assert index.propose(2) == []
    index.prepare([1, 2])  # a regenerate of its start: what followed is gone
    assert index.propose(2) == []


def test_a_new_conversation_starts_a_new_chat() -> None:
    index = SuffixIndex(background=False)
    index.prepare([9, 1, 2, 3, 4, 5])
    index.extend([6, 7])
    # Mostly new text sharing only a system prompt: the old chat is not "this chat".
    index.prepare([9, 20, 21, 22, 23, 24, 1, 2])
    assert index.propose(2) == []
    assert index.said == 8


def test_an_idle_index_holds_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(suffix_index, "IDLE_S", 0.05)

    def building() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "suffix-index" and t.is_alive()}

    index = SuffixIndex()
    before = building()  # other indexes' (this test's is not started yet)
    index.put(1, [1, 2, 3])
    assert index.wait_idle(timeout=30)
    [mine] = building() - before
    mine.join(timeout=30)
    assert not mine.is_alive()
    index.put(2, [4, 5, 6])  # work again: a new thread builds it
    assert index.wait_idle(timeout=30)
    index.prepare([4, 5])
    assert index.propose(1)[0].tokens == (6,)
    index.close()
