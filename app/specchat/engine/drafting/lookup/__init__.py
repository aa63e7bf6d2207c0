"""Prompt lookup: copies the continuation of the latest earlier match of the context's tail
(lookup_drafter.py: the drafter, its column in a recorded answer)."""

from specchat.engine.drafting.lookup.lookup_drafter import PromptLookupDrafter

__all__ = ["PromptLookupDrafter"]
