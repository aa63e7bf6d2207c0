"""Tiny GGUF files (0.3 to 1.5 MB, F32, random weights) with llama.cpp's exact tensor
layout and metadata for today's architectures, for tests and the self-test.

Each module writes one family and says which llama.cpp loader and graph its shapes follow.
The writers import `gguf` inside themselves, as tinymodels does: only tests and the
self-test need it.

The EAGLE-3 and DFlash writers live with their drafters (engine/drafting/eagle3/,
engine/drafting/dflash/) and import this package's weights: they are found here on first
use, so that importing either first makes no import cycle.
"""

from typing import Any

from specchat.tinyarch.dense import DenseShape, write_tiny_dense
from specchat.tinyarch.gemma4 import Gemma4Shape, write_tiny_gemma4, write_tiny_gemma4_assistant
from specchat.tinyarch.qwen35 import Qwen35Shape, write_tiny_qwen35

__all__ = [
    "DenseShape",
    "Gemma4Shape",
    "Qwen35Shape",
    "write_tiny_dense",
    "write_tiny_dflash",
    "write_tiny_eagle3",
    "write_tiny_gemma4",
    "write_tiny_gemma4_assistant",
    "write_tiny_qwen35",
]


def __getattr__(name: str) -> Any:
    if name == "write_tiny_eagle3":
        from specchat.engine.drafting.eagle3.eagle3_tiny import write_tiny_eagle3

        return write_tiny_eagle3
    if name == "write_tiny_dflash":
        from specchat.engine.drafting.dflash.dflash_tiny import write_tiny_dflash

        return write_tiny_dflash
    raise AttributeError(name)
