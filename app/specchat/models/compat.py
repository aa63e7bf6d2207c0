"""Target/draft compatibility decided from GGUF metadata alone, before any weights load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.models.gguf_format import GGUFError
from specchat.models.gguf_reader import GGUFMetadata, read_metadata, validate

#: llama.cpp's speculative-decoding rule (common/speculative.cpp): vocabulary sizes may
#: differ by padding up to this many tokens, and texts are compared from this id on
#: (the first ids are control tokens that conversions number differently).
MAX_VOCAB_SIZE_DIFFERENCE = 128
CHECK_START_TOKEN_ID = 5

_KEYS = (
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
)


@dataclass(frozen=True)
class CompatVerdict:
    """Whether a draft can serve a target.

    Attributes:
        ok: True when the draft's tokens mean the same to the target.
        reason: why not (or a short confirmation when ok), for the user.
    """

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _tokenizer(meta: GGUFMetadata, role: str) -> tuple[str, str, list[str]]:
    model = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(model, str) or not isinstance(tokens, list) or not tokens:
        raise GGUFError(f"the {role} has no tokenizer in its metadata")
    pre = meta.get("tokenizer.ggml.pre")
    # llama.cpp treats a missing pre-tokenizer as "default".
    return model, pre if isinstance(pre, str) else "default", tokens


def compare_metadata(target: GGUFMetadata, draft: GGUFMetadata) -> CompatVerdict:
    """The verdict for two already-read metadata sets (see check_compatible)."""
    try:
        t_model, t_pre, t_tokens = _tokenizer(target, "target")
        d_model, d_pre, d_tokens = _tokenizer(draft, "draft")
    except GGUFError as error:
        return CompatVerdict(False, str(error))
    if t_model != d_model:
        return CompatVerdict(
            False, f"tokenizer types differ: target uses {t_model!r}, draft {d_model!r}"
        )
    if t_pre != d_pre:
        return CompatVerdict(
            False, f"pre-tokenizers differ: target uses {t_pre!r}, draft {d_pre!r}"
        )
    checks: tuple[tuple[str, str], ...] = (
        ("tokenizer.ggml.add_bos_token", "add-BOS flags"),
        ("tokenizer.ggml.add_eos_token", "add-EOS flags"),
        ("tokenizer.ggml.bos_token_id", "BOS tokens"),
        ("tokenizer.ggml.eos_token_id", "EOS tokens"),
    )
    for key, what in checks:
        t_value: Any = target.get(key)
        d_value: Any = draft.get(key)
        if t_value != d_value:
            return CompatVerdict(False, f"{what} differ: target has {t_value!r}, draft {d_value!r}")
    t_size, d_size = len(t_tokens), len(d_tokens)
    if abs(t_size - d_size) > MAX_VOCAB_SIZE_DIFFERENCE:
        return CompatVerdict(
            False,
            f"vocabulary sizes differ by {abs(t_size - d_size)} tokens (target {t_size}, "
            f"draft {d_size}; at most {MAX_VOCAB_SIZE_DIFFERENCE} allowed)",
        )
    end = min(t_size, d_size)
    # Comparing the slices is a C-speed memcmp-like loop; only on a mismatch do we walk to
    # find the first differing id for the message.
    if t_tokens[CHECK_START_TOKEN_ID:end] != d_tokens[CHECK_START_TOKEN_ID:end]:
        for index in range(CHECK_START_TOKEN_ID, end):
            if t_tokens[index] != d_tokens[index]:
                return CompatVerdict(
                    False,
                    f"draft vocabulary differs at token {index}: "
                    f"{_short(t_tokens[index])} vs {_short(d_tokens[index])}",
                )
    return CompatVerdict(True, f"same {t_model}/{t_pre} vocabulary ({t_size} tokens)")


def check_compatible(target: str | Path, draft: str | Path) -> CompatVerdict:
    """Can `draft` propose tokens for `target`? Reads only the two files' tokenizer metadata.

    The rule is llama.cpp's: same tokenizer type and pre-tokenizer, same add-BOS/add-EOS
    flags and BOS/EOS ids, vocabulary sizes within 128, identical token texts from id 5 on.
    A file that cannot be read gives a verdict saying why, never an exception.
    """
    metas = []
    for role, path in (("target", target), ("draft", draft)):
        try:
            metas.append(read_metadata(path, keys=_KEYS))
        except GGUFError as error:
            return CompatVerdict(False, f"cannot read the {role} ({Path(path).name}): {error}")
    return compare_metadata(metas[0], metas[1])


def damaged_file(target: Path, draft: Path | None) -> str:
    """Why a file of a pair cannot be loaded (truncated, not a GGUF...), or "" if both can.

    The whole header is checked (every tensor lies inside the file), so a file listed as
    ready is one llama.cpp will load.
    """
    for role, path in (("target", target), ("draft", draft)):
        if path is None:
            continue
        try:
            validate(path)
        except GGUFError as error:
            return f"the {role} {path.name} cannot be used: {error}"
        except OSError as error:
            return f"the {role} {path.name} cannot be read: {error.strerror or error}"
    return ""
