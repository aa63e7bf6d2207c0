"""The tiny architecture files, written once per test session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from specchat.tinyarch import (
    write_tiny_dflash,
    write_tiny_eagle3,
    write_tiny_gemma4,
    write_tiny_gemma4_assistant,
    write_tiny_qwen35,
)
from specchat.tinymodels import TinySpec, write_tiny_model


@dataclass(frozen=True)
class TinyArchFiles:
    """One file per role the drafter tests need.

    Attributes:
        qwen35_mtp: a qwen35 target with its MTP block.
        qwen35_plain: the same trunk without the MTP block (a hybrid draft model).
        qwen35_close: the plain trunk perturbed by 1%: a close hybrid draft.
        gemma4: a gemma4 target.
        gemma4_close: the target perturbed by 1%.
        gemma4_assistant: the target's MTP drafter.
        llama: tinymodels' llama target (TinySpec(seed=1)).
        eagle3: an EAGLE-3 draft for `llama`.
        dflash: a DFlash draft for the qwen35 trunk.
    """

    qwen35_mtp: Path
    qwen35_plain: Path
    qwen35_close: Path
    gemma4: Path
    gemma4_close: Path
    gemma4_assistant: Path
    llama: Path
    eagle3: Path
    dflash: Path


@pytest.fixture(scope="session")
def tiny_arch(tmp_path_factory: pytest.TempPathFactory) -> TinyArchFiles:
    folder = tmp_path_factory.mktemp("tinyarch")
    return TinyArchFiles(
        qwen35_mtp=write_tiny_qwen35(folder / "qwen35-mtp.gguf"),
        qwen35_plain=write_tiny_qwen35(folder / "qwen35.gguf", mtp=False),
        qwen35_close=write_tiny_qwen35(folder / "qwen35-close.gguf", mtp=False, perturb=0.01),
        gemma4=write_tiny_gemma4(folder / "gemma4.gguf"),
        gemma4_close=write_tiny_gemma4(folder / "gemma4-close.gguf", perturb=0.01),
        gemma4_assistant=write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf"),
        llama=write_tiny_model(folder / "llama.gguf", TinySpec(seed=1)),
        eagle3=write_tiny_eagle3(folder / "eagle3.gguf"),
        dflash=write_tiny_dflash(folder / "dflash.gguf"),
    )
