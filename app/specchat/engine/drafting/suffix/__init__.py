"""The suffix drafter: what followed the text's ending anywhere already said, read from the
session's suffix index (suffix_drafter.py: the drafter, its column in a recorded answer)."""

from specchat.engine.drafting.suffix.suffix_drafter import SuffixDrafter

__all__ = ["SuffixDrafter"]
