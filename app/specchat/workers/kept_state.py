"""Keeping a conversation's KV state on disk for both models of a pair, between answers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from specchat.engine.llamacpp.kv_store import MIN_TOKENS, KVStore

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel
    from specchat.engine.session import ChatEngine

log = logging.getLogger(__name__)

#: Tokens the draft model reads per event-loop turn when catching up between answers: a
#: request sent meanwhile waits for one chunk at most.
CATCH_UP_CHUNK = 128
#: A draft model this close to the conversation (it drafted the answer) is kept as it is:
#: its first round reads the rest anyway.
NEAR = 8


def keep_state(kv: KVStore, engine: ChatEngine, conversation: str) -> list[int] | None:
    """Save what both models hold of `conversation`; returns the tokens the draft model
    still has to read (a plain or auto answer leaves it behind) before its state is kept."""
    target, draft = engine.target, engine.draft
    try:
        kv.save(target, conversation)
        if draft is None:
            return None
        tokens = list(target.tokens)
        lag = len(tokens) - draft.cached_prefix(tokens)
        if lag > NEAR and draft.can_rollback and MIN_TOKENS <= len(tokens) <= draft.n_ctx:
            return tokens
        kv.save(draft, conversation)
    except OSError:
        log.info("the KV state could not be kept", exc_info=True)
    return None


def catch_up(kv: KVStore, draft: LlamaModel, conversation: str, tokens: list[int]) -> bool:
    """Read the next chunk of `tokens` into the draft model, and keep its state once it holds
    them all; returns whether more is left to read (False too when it failed)."""
    try:
        cached = draft.sync(tokens)
        if cached < len(tokens):
            draft.decode(tokens[cached : cached + CATCH_UP_CHUNK], logits="none")
            return True
        kv.save(draft, conversation)
    except Exception:
        log.info("the draft model could not catch up", exc_info=True)
    return False


def restore_state(kv: KVStore, engine: ChatEngine, conversation: str, prompt: list[int]) -> int:
    """Load both models' kept states where they hold more of `prompt` than their caches;
    returns how many tokens of it the target's cache holds from its file."""
    try:
        restored = kv.restore(engine.target, conversation, prompt)
        # The draft's too: drafting modes would otherwise read the prompt again.
        if engine.draft is not None:
            kv.restore(engine.draft, conversation, prompt)
    except OSError:
        log.info("the kept KV state could not be read", exc_info=True)
        return 0
    return restored
