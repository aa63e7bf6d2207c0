"""Every drafter's proposal at every position of an answer, so any policy can be replayed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.sampling import token_probability

if TYPE_CHECKING:
    from specchat.engine.drafting.base import Head

#: Longest proposal recorded per drafter: what `auto` may ask of each (a draft head's as a
#: draft model's).
LOOKUP_DEPTH = 64
DRAFT_DEPTH = 16

#: Rows of draft-model logits held at once (each row is a vocabulary's worth of floats).
_CHUNK = 32


def _read_as_verified(proposal: Sequence[int], answer: Sequence[int]) -> tuple[int, ...]:
    """The proposal as far as greedy verification reads it: the agreeing run, then the first
    token that disagrees (the rest can never be kept)."""
    out = []
    for offered, written in zip(proposal, answer, strict=False):
        out.append(int(offered))
        if offered != written:
            break
    return tuple(out)


@dataclass(frozen=True)
class AnswerTrace:
    """One temperature-0 answer with what each drafter would have proposed at each position.

    At temperature 0 the text is the same whatever the policy (verification is exact), so a
    policy replayed on these records sees exactly the proposals it would have seen live; only
    the costs are priced anew.

    Attributes:
        prompt: the prompt's id.
        prompt_tokens: the prompt.
        answer: the target's tokens (plain decoding's answer).
        lookup: per position, prompt lookup's proposal read as far as verification reads it.
        lookup_len: per position, the proposal's full length.
        match_len: per position, how far back lookup's match agreed with the text.
        draft: per position, the draft model's greedy proposal as far as verification reads
            it (None without a draft model).
        draft_confidence: per position, the draft model's top probability there (after the
            prompt and the answer before it): the confidence it drafts that position with
            while its draft agrees with the answer (None if not recorded).
        margins: per position, the target's top-1 − top-2 logit where it chose that token
            (how sure it was; None if not recorded).
        draft_past_miss: per position where the draft model's choice is not the answer's
            token, the confidence it drafts each further token with after its own choice
            (greedy, up to DRAFT_DEPTH − 1 of them); None at positions where it agrees, and
            None for the whole answer if not recorded. Such tokens are never kept, but their
            confidence decides how far a draft goes on past its miss.
        heads: per drafter that drafts with a head over the target's hidden state ("mtp"),
            per position, the head's greedy draft as far as verification reads it (empty
            where the pair had no head, or the trace was recorded before heads were).
    """

    prompt: str
    prompt_tokens: tuple[int, ...]
    answer: tuple[int, ...]
    lookup: tuple[tuple[int, ...], ...]
    lookup_len: tuple[int, ...]
    match_len: tuple[int, ...]
    draft: tuple[tuple[int, ...], ...] | None = None
    draft_confidence: tuple[float, ...] | None = None
    margins: tuple[float, ...] | None = None
    draft_past_miss: tuple[tuple[float, ...] | None, ...] | None = None
    heads: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)

    def margin_before(self, i: int) -> float | None:
        """The target's margin on the token before position i (None: before the answer, or
        not recorded)."""
        return None if self.margins is None or i == 0 else self.margins[i - 1]

    def lookup_kept(self, i: int) -> int:
        """How many of lookup's proposal at position i the target keeps."""
        return agreement(self.lookup[i], self.answer[i:])

    def draft_kept(self, i: int) -> int:
        """How many of the draft model's proposal at position i the target keeps."""
        return 0 if self.draft is None else agreement(self.draft[i], self.answer[i:])

    def head_kept(self, name: str, i: int) -> int:
        """How many of the head drafter `name`'s draft at position i the target keeps."""
        return agreement(self.heads[name][i], self.answer[i:])

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "record": "trace",
            "prompt": self.prompt,
            "prompt_tokens": list(self.prompt_tokens),
            "answer": list(self.answer),
            "lookup": [list(p) for p in self.lookup],
            "lookup_len": list(self.lookup_len),
            "match_len": list(self.match_len),
            "draft": None if self.draft is None else [list(p) for p in self.draft],
            "draft_confidence": None
            if self.draft_confidence is None
            else list(self.draft_confidence),
            "margins": None if self.margins is None else list(self.margins),
        }
        if self.draft_past_miss is not None:
            data["draft_past_miss"] = [None if c is None else list(c) for c in self.draft_past_miss]
        if self.heads:
            # Written only where there are heads: a trace without them reads as before.
            data["heads"] = {name: [list(p) for p in d] for name, d in sorted(self.heads.items())}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnswerTrace:
        """Raises ValueError (KeyError and TypeError included) on a malformed record."""
        answer = tuple(int(t) for t in data["answer"])
        lookup = tuple(tuple(int(t) for t in p) for p in data["lookup"])
        lookup_len = tuple(int(n) for n in data["lookup_len"])
        match_len = tuple(int(n) for n in data["match_len"])
        draft = data.get("draft")
        drafts = None if draft is None else tuple(tuple(int(t) for t in p) for p in draft)
        confidence = data.get("draft_confidence")
        confidences = None if confidence is None else tuple(float(p) for p in confidence)
        margin = data.get("margins")
        margins = None if margin is None else tuple(float(m) for m in margin)
        past = data.get("draft_past_miss")
        past_miss = (
            None
            if past is None
            else tuple(None if c is None else tuple(float(p) for p in c) for c in past)
        )
        heads = {
            str(name): tuple(tuple(int(t) for t in p) for p in drafts)
            for name, drafts in (data.get("heads") or {}).items()
        }
        lengths = {len(answer), len(lookup), len(lookup_len), len(match_len)}
        lengths.update(len(drafts) for drafts in heads.values())
        if drafts is not None:
            lengths.add(len(drafts))
        if confidences is not None:
            lengths.add(len(confidences))
        if margins is not None:
            lengths.add(len(margins))
        if past_miss is not None:
            lengths.add(len(past_miss))
        if len(lengths) != 1:
            raise ValueError("per-position lists of different lengths")
        return cls(
            prompt=str(data["prompt"]),
            prompt_tokens=tuple(int(t) for t in data["prompt_tokens"]),
            answer=answer,
            lookup=lookup,
            lookup_len=lookup_len,
            match_len=match_len,
            draft=drafts,
            draft_confidence=confidences,
            margins=margins,
            draft_past_miss=past_miss,
            heads=heads,
        )


def agreement(proposal: Sequence[int], answer: Sequence[int]) -> int:
    kept = 0
    while kept < len(proposal) and kept < len(answer) and proposal[kept] == answer[kept]:
        kept += 1
    return kept


def record_trace(
    prompt_id: str,
    prompt: Sequence[int],
    answer: Sequence[int],
    *,
    draft_model: LlamaModel | None = None,
    heads: Mapping[str, Head] | None = None,
    target: LlamaModel | None = None,
    margins: Sequence[float] | None = None,
) -> AnswerTrace:
    """What lookup, the draft model and each head (by the drafter that drafts with it) would
    propose at every position of `answer`.

    The draft model's greedy proposal at position i agrees with the answer exactly as long as
    its argmax after prompt + answer[:j] equals answer[j] for j = i, i+1, …: so one batched
    pass over the answer gives every position's proposal as far as verification reads it.
    (Its batched rows may differ from one-token rows by float noise, as in any verify pass.)
    A head's draft chains on its own hidden state, so it is drafted at every position after
    `target` (the model the heads follow) has read the text before it (see _head_drafts);
    that leaves its cache holding the prompt and the answer but its last token.
    `margins`: the target's margin at each answer token, as the answer's run recorded them.
    """
    from specchat.engine.drafting import PromptLookupDrafter

    prompt, answer = list(prompt), list(answer)
    lookup = PromptLookupDrafter()
    text = [*prompt, *answer]
    proposals, lengths, matches = [], [], []
    for i in range(len(answer)):
        proposal, match = lookup.find(text[: len(prompt) + i], LOOKUP_DEPTH)
        proposals.append(_read_as_verified(proposal, answer[i:]))
        lengths.append(len(proposal))
        matches.append(match)
    drafts = confidences = past_miss = None
    if draft_model is not None and answer:
        guesses, top = _draft_argmax(draft_model, prompt, answer)
        drafts = tuple(
            _read_as_verified(guesses[i : i + DRAFT_DEPTH], answer[i:]) for i in range(len(answer))
        )
        confidences = tuple(round(p, 6) for p in top)  # what a rounds file keeps of them
        past_miss = draft_past_misses(draft_model, prompt, answer, guesses)
    head_drafts = {}
    if heads and answer:
        if target is None:
            raise ValueError("a head's drafts are recorded after its target's cache: give it")
        head_drafts = {
            name: _head_drafts(head, target, prompt, answer) for name, head in heads.items()
        }
    return AnswerTrace(
        prompt_id,
        tuple(prompt),
        tuple(answer),
        tuple(proposals),
        tuple(lengths),
        tuple(matches),
        drafts,
        confidences,
        None if margins is None else tuple(round(float(m), 4) for m in margins[: len(answer)]),
        past_miss,
        head_drafts,
    )


def draft_past_misses(
    model: LlamaModel, prompt: Sequence[int], answer: Sequence[int], choices: Sequence[int]
) -> tuple[tuple[float, ...] | None, ...]:
    """`AnswerTrace.draft_past_miss`: at each position whose draft-model choice (`choices`,
    its argmax there) is not the answer's token, the draft model's confidence at each token it
    drafts after that choice, one token a decode as a draft goes."""
    text = [*prompt, *answer]
    out: list[tuple[float, ...] | None] = []
    for i, (choice, written) in enumerate(zip(choices, answer, strict=True)):
        if choice == written:
            out.append(None)
            continue
        end = len(prompt) + i
        cached = model.sync(text[:end])
        if cached < end:
            model.decode(text[cached:end], logits="none")
        token, chain = int(choice), []
        try:
            for _ in range(DRAFT_DEPTH - 1):
                row = np.asarray(model.decode([token], logits="last"))[-1]
                token = int(np.argmax(row))
                chain.append(round(token_probability(row, token), 6))  # as a live draft reads it
        finally:
            model.truncate(end)
        out.append(tuple(chain))
    return tuple(out)


def _head_drafts(
    head: Head, target: LlamaModel, prompt: list[int], answer: list[int]
) -> tuple[tuple[int, ...], ...]:
    """The head's greedy draft at every position of `answer`, read as verification reads it.

    Each step of a head's draft reads the hidden state of the step before, not the target's,
    so no batched pass gives them all: as a round does, the head drafts after the target has
    cached the text before the position, and the target then reads one more token."""
    cached = target.sync(prompt[:-1])
    if cached < len(prompt) - 1:
        target.decode(prompt[cached:-1], logits="none")
    text = [*prompt, *answer]
    drafts = []
    for i in range(len(answer)):
        last = text[len(prompt) + i - 1]
        guess = head.draft(last, min(DRAFT_DEPTH, len(answer) - i))
        drafts.append(_read_as_verified(guess, answer[i:]))
        target.decode([last], logits="none")
    return tuple(drafts)


def _draft_argmax(
    model: LlamaModel, prompt: list[int], answer: list[int]
) -> tuple[list[int], list[float]]:
    """The draft model's argmax after prompt + answer[:j], for every j, and its probability
    (softmax at temperature 1, as the draft model's confidence stop reads it)."""
    cached = model.sync(prompt[:-1])
    if cached < len(prompt) - 1:
        model.decode(prompt[cached:-1], logits="none")
    base = model.n_past
    feed = [prompt[-1], *answer[:-1]]
    guesses: list[int] = []
    top: list[float] = []
    try:
        for start in range(0, len(feed), _CHUNK):
            rows = np.asarray(model.decode(feed[start : start + _CHUNK], logits="all"))
            guesses.extend(int(t) for t in np.argmax(rows, axis=1))
            peak = rows.max(axis=1, keepdims=True)
            top.extend(float(p) for p in 1.0 / np.exp(rows - peak).sum(axis=1))
    finally:
        model.truncate(base)
    return guesses, top
