"""Which peers a bench runs for a pair: llama-server's speculative settings, llama-cpp-python's
two ways of decoding, and `specchat serve` plain and auto beside them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: llama-server's plain decoding: every speed-up in the peers table is over it.
SERVER_PLAIN = "llama-server plain"
#: The draft lengths tried for draft-simple beside its default (3 in this llama.cpp); the
#: report names the best for the set, chosen knowing the results.
DRAFT_N_MAX = (2, 4, 8)
#: llama-server's draft-simple at its own default draft length.
DRAFT_SIMPLE_DEFAULT = "llama-server draft-simple"
DRAFT_SIMPLE_PREFIX = "llama-server draft-simple n-max "
#: SpecChat's head drafters and the llama-server speculative type that drafts with the same
#: head; True where the head is the pair's draft file (given with -md), False where it is
#: part of the target (a Qwen3.5 `nextn` layer).
HEAD_TYPES = {
    "mtp": ("draft-mtp", False),
    "assistant": ("draft-mtp", True),
    "eagle3": ("draft-eagle3", True),
    "dflash": ("draft-dflash", True),
}
PYTHON_PLAIN = "llama-cpp-python plain"
PYTHON_LOOKUP = "llama-cpp-python prompt lookup"
#: `specchat serve` among the peers, by the mode its requests ask for.
SPECCHAT_SERVE = {"plain": "SpecChat serve plain", "auto": "SpecChat serve auto"}


@dataclass(frozen=True)
class PeerConfig:
    """One peer.

    Attributes:
        name: how the report names it.
        server_args: llama-server's arguments on top of the shared settings (None: not a
            llama-server peer but llama-cpp-python).
        lookup: llama-cpp-python with LlamaPromptLookupDecoding (its defaults).
        specchat_mode: `specchat serve` asked in this mode (None: not SpecChat).
        draft: the pair's draft file `specchat serve` loads (None: none, or not SpecChat).
    """

    name: str
    server_args: tuple[str, ...] | None = None
    lookup: bool = False
    specchat_mode: str | None = None
    draft: Path | None = None

    @property
    def is_server(self) -> bool:
        """Whether it is a llama-server peer."""
        return self.server_args is not None

    @property
    def files_beside_target(self) -> tuple[Path, ...]:
        """What it loads besides the target: a draft model's or a head's file."""
        args = self.server_args or ()
        given = [Path(args[i + 1]) for i, arg in enumerate(args[:-1]) if arg == "-md"]
        return (self.draft, *given) if self.draft is not None else tuple(given)

    @property
    def shown_arguments(self) -> tuple[str, ...]:
        """How the report names what it runs with beyond the shared settings."""
        if self.specchat_mode is not None:
            return ("specchat serve", f"speculative.mode={self.specchat_mode}")
        return self.server_args or ()


def peer_configs(
    *, draft: Path | None, heads: Sequence[str] = (), n_max: Sequence[int] = DRAFT_N_MAX
) -> tuple[PeerConfig, ...]:
    """Every peer for a pair with `draft` (a draft model or a head's file) and the head
    drafters `heads` SpecChat offers for it."""
    configs = [
        PeerConfig(SERVER_PLAIN, ("--spec-type", "none")),
        *(
            PeerConfig(name, specchat_mode=mode, draft=draft)
            for mode, name in SPECCHAT_SERVE.items()
        ),
        PeerConfig("llama-server --spec-default", ("--spec-default",)),
    ]
    head_file = any(HEAD_TYPES[h][1] for h in heads if h in HEAD_TYPES)
    if draft is not None and not head_file:
        simple = ("--spec-type", "draft-simple", "-md", str(draft))
        configs.append(PeerConfig(DRAFT_SIMPLE_DEFAULT, simple))
        configs += [
            PeerConfig(f"{DRAFT_SIMPLE_PREFIX}{n}", (*simple, "--spec-draft-n-max", str(n)))
            for n in n_max
        ]
    for head in heads:
        if head not in HEAD_TYPES:
            continue
        spec_type, uses_file = HEAD_TYPES[head]
        if uses_file and draft is None:
            continue
        args = ("--spec-type", spec_type, *(("-md", str(draft)) if uses_file else ()))
        configs.append(PeerConfig(f"llama-server {spec_type}", args))
    configs += [PeerConfig(PYTHON_PLAIN), PeerConfig(PYTHON_LOOKUP, lookup=True)]
    return tuple(dict((c.name, c) for c in configs).values())
