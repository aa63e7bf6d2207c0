"""The pairs the check measures, and their synthetic files at real or (--small) tiny sizes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Pair:
    """A target with what drafts for it.

    Attributes:
        name: the pair, as steps and files are named ("llama-8b", ...).
        target: the target's file name in tools/write_proportional_models.SPECS.
        draft: the draft model's, or "" for none.
        heads: each draft head's drafter ("mtp": the target's own layers, "assistant") and
            the file its weights come from ("" for the target's own).
        replay: whether recorded traces are re-priced under its table (a pair with a
            draft model: the traces record one).
    """

    name: str
    target: str
    draft: str = ""
    heads: tuple[tuple[str, str], ...] = ()
    replay: bool = False

    @property
    def files(self) -> tuple[str, ...]:
        heads = tuple(file for _, file in self.heads if file)
        return (self.target, *((self.draft,) if self.draft else ()), *heads)

    @property
    def load_mtp(self) -> bool:
        return any(name == "mtp" for name, _ in self.heads)


#: In the order they run: the shipped GPU table's pair first, then the default pair, then
#: today's drafting heads.
PAIRS = (
    Pair("llama-8b", "llama-8b", "llama-1b", replay=True),
    Pair("qwen2.5-1.5b", "qwen2.5-1.5b", "qwen2.5-0.5b", replay=True),
    Pair("qwen3.5-4b", "qwen35-4b-mtp", "qwen35-0.8b-mtp", heads=(("mtp", ""),), replay=True),
    Pair("gemma4-e2b", "gemma4-e2b", heads=(("assistant", "gemma4-e2b-assistant"),)),
)


def proportional() -> ModuleType:
    """tools/write_proportional_models, imported from this checkout."""
    tools = str(REPO / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import write_proportional_models

    return write_proportional_models


def specs(*, small: bool) -> dict[str, Any]:
    """Every file's Spec by name: the real shapes, or tiny ones of the same layouts."""
    tool = proportional()
    if not small:
        return {spec.name: spec for spec in tool.SPECS}
    return {spec.name: spec for spec in _small_specs(tool)}


def _small_specs(tool: ModuleType) -> list[Any]:
    """The same files at tiny sizes (the tests' shapes), quantised as the real ones are."""
    from specchat.tinyarch import (
        DenseShape,
        Gemma4Shape,
        Qwen35Shape,
        write_tiny_dense,
        write_tiny_gemma4,
        write_tiny_gemma4_assistant,
        write_tiny_qwen35,
    )

    spec = tool.Spec
    dense = DenseShape(n_embd=256, n_layer=2, n_head=4, n_head_kv=2, n_ff=512)
    qwen = Qwen35Shape()
    gemma = Gemma4Shape()

    def dense_spec(name: str, seed: int, ftype: str) -> Any:
        def layout(path: Path, maker: Any) -> Path:
            return write_tiny_dense(path, seed=seed, shape=dense, name=name, maker=maker)

        return spec(name, layout, ftype=ftype)

    def qwen_spec(name: str, seed: int) -> Any:
        def layout(path: Path, maker: Any) -> Path:
            return write_tiny_qwen35(path, seed=seed, mtp=True, shape=qwen, name=name, maker=maker)

        return spec(name, layout)

    return [
        dense_spec("llama-8b", 1, "Q4_0"),
        dense_spec("llama-1b", 2, "Q4_0"),
        dense_spec("qwen2.5-1.5b", 1, "Q4_K_M"),
        dense_spec("qwen2.5-0.5b", 2, "Q4_K_M"),
        qwen_spec("qwen35-4b-mtp", 1),
        qwen_spec("qwen35-0.8b-mtp", 2),
        spec(
            "gemma4-e2b",
            lambda path, maker: write_tiny_gemma4(path, shape=gemma, maker=maker),
        ),
        spec(
            "gemma4-e2b-assistant",
            lambda path, maker: write_tiny_gemma4_assistant(path, target=gemma, maker=maker),
        ),
    ]


def models_dir(work: Path, *, small: bool) -> Path:
    """Where the models step writes (tiny files apart: they share the real ones' names)."""
    return work / ("models-small" if small else "models")


def model_file(work: Path, name: str, *, small: bool) -> Path:
    """Where the models step wrote file `name`."""
    return models_dir(work, small=small) / specs(small=small)[name].file_name
