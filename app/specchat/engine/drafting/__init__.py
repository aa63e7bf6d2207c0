"""Drafters: propose the next tokens cheaply, for the target to check in one pass.

One package per drafter; each registers itself (`@register`), and importing this package
registers the built-in ones (their `priority` orders them: lookup, the draft model, chain).
The import lines below are the registry's list: a drafter is a package of its own (its
drafter, its llama.cpp driver, its replay column, its tiny test model), one line here. What
the copying drafters share (lookup, suffix, prediction) is copies/.
"""

from specchat.engine.costs.priors import HURDLE, MAX_K, MAX_LOOKUP_K, SCORED_HURDLE
from specchat.engine.drafting.base import (
    Acceptance,
    Answer,
    Draft,
    Drafter,
    Estimates,
    Head,
    Listing,
    LoadedPair,
    Offer,
    Outcome,
    expected_tokens,
)
from specchat.engine.drafting.chain import ChainDrafter
from specchat.engine.drafting.copies.copy_acceptance import (
    CopyAcceptance,
    LookupLedger,
    LookupSurvival,
)
from specchat.engine.drafting.copies.copying import CopyDraft
from specchat.engine.drafting.dflash import DFlashDrafter
from specchat.engine.drafting.draft_model import DraftModelDrafter, ModelDraft
from specchat.engine.drafting.eagle3 import Eagle3Drafter
from specchat.engine.drafting.head import HeadDrafter, head_architectures, head_files, load_head
from specchat.engine.drafting.lookup import PromptLookupDrafter
from specchat.engine.drafting.mtp import AssistantDrafter, MtpDrafter
from specchat.engine.drafting.prediction import PredictionDrafter
from specchat.engine.drafting.registry import (
    AUTO,
    PLAIN,
    Drafters,
    ModeInfo,
    auto_drafters,
    mode_info,
    mode_name,
    mode_names,
    modes,
    needs_model,
    parse_mode,
    reads_target,
    register,
    unregister,
)
from specchat.engine.drafting.suffix import SuffixDrafter

__all__ = [
    "AUTO",
    "HURDLE",
    "MAX_K",
    "MAX_LOOKUP_K",
    "PLAIN",
    "SCORED_HURDLE",
    "Acceptance",
    "Answer",
    "AssistantDrafter",
    "ChainDrafter",
    "CopyAcceptance",
    "CopyDraft",
    "DFlashDrafter",
    "Draft",
    "DraftModelDrafter",
    "Drafter",
    "Drafters",
    "Eagle3Drafter",
    "Estimates",
    "Head",
    "HeadDrafter",
    "Listing",
    "LoadedPair",
    "LookupLedger",
    "LookupSurvival",
    "ModeInfo",
    "ModelDraft",
    "MtpDrafter",
    "Offer",
    "Outcome",
    "PredictionDrafter",
    "PromptLookupDrafter",
    "SuffixDrafter",
    "auto_drafters",
    "expected_tokens",
    "head_architectures",
    "head_files",
    "load_head",
    "mode_info",
    "mode_name",
    "mode_names",
    "modes",
    "needs_model",
    "parse_mode",
    "reads_target",
    "register",
    "unregister",
]
