"""Whether a catalog pair's drafter suits its target, from GGUF metadata alone.

A draft model must share the target's vocabulary (compat.py). An MTP head has no file of
its own: the target must carry it. An assistant has no vocabulary at all (it drafts from the
target's hidden state), so what can be checked is that it is an assistant, and one made for
the target's architecture.
"""

from __future__ import annotations

from pathlib import Path

from specchat.models.compat import CompatVerdict, check_compatible
from specchat.models.drafter_kinds import DrafterKind
from specchat.models.gguf_format import GGUFError
from specchat.models.gguf_reader import GGUFMetadata, read_metadata

#: Assistant architectures llama.cpp loads, and the target architecture each drafts for.
ASSISTANT_TARGETS = {"gemma4-assistant": "gemma4"}


def check_drafter(drafter: DrafterKind, target: Path, draft: Path | None) -> CompatVerdict:
    """The verdict on a pair's files for its drafter; a file that cannot be read gives a
    verdict saying why, never an exception."""
    if drafter is DrafterKind.MTP:
        return check_mtp_head(target)
    if draft is None:
        return CompatVerdict(False, f"the pair's {drafter.label} file is missing")
    if drafter is DrafterKind.ASSISTANT:
        return check_assistant(target, draft)
    return check_compatible(target, draft)


def _metadata(path: Path, role: str) -> GGUFMetadata | CompatVerdict:
    try:
        # Scalars only: a vocabulary array is never needed here and may be 250,000 strings.
        return read_metadata(path, arrays=False)
    except GGUFError as error:
        return CompatVerdict(False, f"cannot read the {role} ({path.name}): {error}")


def check_mtp_head(target: Path) -> CompatVerdict:
    """Whether the target file carries a multi-token-prediction head to draft with.

    llama.cpp marks one with `<arch>.nextn_predict_layers`; many conversions drop the head
    (and the key), and such a file cannot draft for itself.
    """
    meta = _metadata(target, "target")
    if isinstance(meta, CompatVerdict):
        return meta
    key = f"{meta.architecture}.nextn_predict_layers"
    layers = meta.get(key)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        return CompatVerdict(
            False, f"the target has no MTP head ({key} is not in its metadata, or is 0)"
        )
    return CompatVerdict(True, f"the target carries an MTP head ({key} = {layers})")


def check_assistant(target: Path, assistant: Path) -> CompatVerdict:
    """Whether `assistant` is an assistant model llama.cpp loads, made for the target's
    architecture."""
    meta = _metadata(assistant, "assistant")
    if isinstance(meta, CompatVerdict):
        return meta
    arch = meta.architecture or "?"
    if arch not in ASSISTANT_TARGETS:
        spelled = arch.replace("_", "-")
        if spelled in ASSISTANT_TARGETS:
            # Some published conversions write the name with an underscore, which
            # llama.cpp does not recognise (its loader stops at an unknown architecture).
            return CompatVerdict(
                False,
                f"the assistant's architecture is spelled {arch!r}; llama.cpp reads {spelled!r}",
            )
        known = ", ".join(ASSISTANT_TARGETS)
        return CompatVerdict(
            False, f"the draft file is a {arch!r} model, not an assistant ({known})"
        )
    target_meta = _metadata(target, "target")
    if isinstance(target_meta, CompatVerdict):
        return target_meta
    wanted = ASSISTANT_TARGETS[arch]
    if target_meta.architecture != wanted:
        return CompatVerdict(
            False,
            f"a {arch} drafts for a {wanted!r} target, not a {target_meta.architecture!r} one",
        )
    return CompatVerdict(
        True, f"a {arch} for this {wanted} target: it drafts from the target's hidden state"
    )
