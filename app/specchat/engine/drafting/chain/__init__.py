"""The chain: prompt lookup first, the draft model when lookup finds nothing
(chain_drafter.py)."""

from specchat.engine.drafting.chain.chain_drafter import ChainDrafter

__all__ = ["ChainDrafter"]
