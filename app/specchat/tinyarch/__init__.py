"""Tiny GGUF files (0.3 to 1.5 MB, F32, random weights) with llama.cpp's exact tensor
layout and metadata for today's architectures, for tests and the self-test.

Each module writes one family and says which llama.cpp loader and graph its shapes follow.
The writers import `gguf` inside themselves, as tinymodels does: only tests and the
self-test need it.
"""

from specchat.tinyarch.dense import DenseShape, write_tiny_dense
from specchat.tinyarch.dflash import write_tiny_dflash
from specchat.tinyarch.eagle3 import write_tiny_eagle3
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
