"""Which drafter a catalog pair uses: a draft model, the target's own MTP head, or an assistant."""

from __future__ import annotations

import enum


class DrafterKind(enum.Enum):
    """What proposes the tokens a catalog pair's target checks.

    The value is what models.toml spells (`drafter = "mtp"`).
    """

    #: A separate, smaller model with the target's vocabulary (the draft file).
    DRAFT_MODEL = "draft-model"
    #: A multi-token-prediction head stored inside the target file (no draft file).
    MTP = "mtp"
    #: An assistant file (e.g. Gemma 4's) that drafts from the target's hidden state and
    #: shares its KV cache; it has no vocabulary of its own to compare with the target's.
    ASSISTANT = "assistant"

    @property
    def has_draft_file(self) -> bool:
        """Whether the pair names a second file (the MTP head lives in the target's)."""
        return self is not DrafterKind.MTP

    @property
    def label(self) -> str:
        """A few words for a list column."""
        return _LABELS[self][0]

    @property
    def description(self) -> str:
        """One line saying how this drafter works."""
        return _LABELS[self][1]


_LABELS = {
    DrafterKind.DRAFT_MODEL: (
        "draft model",
        "a separate draft model with the target's vocabulary",
    ),
    DrafterKind.MTP: (
        "MTP head",
        "the target's own multi-token-prediction head, inside the target file (no draft file)",
    ),
    DrafterKind.ASSISTANT: (
        "assistant",
        "a small model that reads the target's hidden state and shares its KV cache",
    ),
}
