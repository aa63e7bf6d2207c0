"""Random weights for the tiny architectures: seeded matrices, norms, and the perturbation
that turns a copy of a model into a draft of it; and deferred matrices, for writing the same
layouts at real models' sizes (tools/write_proportional_models.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

#: How many of the tiny vocabulary's first tokens are special (tinymodels.SPECIAL_TOKENS).
N_SPECIAL = 3


class WeightMaker:
    """Seeded source of weights; one seed and one order of calls give the same tensors.

    Shapes are numpy's (rows, cols): a GGUF tensor llama.cpp declares as {cols, rows}
    (ne0 first) is written from a (rows, cols) array.
    """

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def mat(self, rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        """A (rows, cols) matrix whose product with a unit-variance vector has variance
        about scale**2 (entries ~ N(0, scale**2 / cols))."""
        values = self._rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)
        return values.astype(np.float32)

    def vec(self, n: int, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
        return (offset + self._rng.standard_normal(n) * scale).astype(np.float32)

    def uniform(self, n: int, low: float, high: float) -> np.ndarray:
        return self._rng.uniform(low, high, n).astype(np.float32)

    @staticmethod
    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def embedding(self, n_vocab: int, n_embd: int) -> np.ndarray:
        """Token embeddings with unit-variance entries, as a trained model's roughly are."""
        return self.mat(n_vocab, n_embd, np.sqrt(n_embd))

    def output_head(self, n_vocab: int, n_embd: int, logit_scale: float) -> np.ndarray:
        """An output matrix whose logits spread by about `logit_scale`, with the special
        tokens quietened: random weights would otherwise end answers after a few tokens."""
        head = self.mat(n_vocab, n_embd, logit_scale)
        head[:N_SPECIAL] *= np.float32(0.2)
        return head


def perturbed(
    tensors: dict[str, np.ndarray], perturb: float, perturb_seed: int
) -> dict[str, np.ndarray]:
    """`tensors` with relative noise on every matrix (norms and biases kept), as
    tinymodels.TinySpec.perturb does: a perturbed copy drafts its original with high but
    imperfect agreement."""
    if not perturb:
        return tensors
    noise = np.random.default_rng(10_000 + perturb_seed)
    out = {}
    for name, value in tensors.items():
        if isinstance(value, np.ndarray) and value.ndim >= 2 and value.dtype == np.float32:
            jitter = noise.standard_normal(value.shape).astype(np.float32)
            value = value + jitter * np.float32(perturb) * value.std()
        out[name] = value
    return out


class Deferred:
    """A matrix whose values are not made: its F16 data is written as a hole in the file
    (a sparse run of zeros) and filled in later, so a layout with real models' sizes can be
    written without holding, or first writing, gigabytes of weights.

    It stands in for a numpy array in gguf's writer (shape, dtype, nbytes, tofile). It is
    the only F16 tensor of a file the tiny writers write, which tells the filler which
    tensors to fill.

    Attributes:
        rows, cols: its (rows, cols) shape, as WeightMaker.mat's.
    """

    dtype = np.dtype(np.float16)

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.dtype.itemsize

    def tofile(self, fout: Any) -> None:
        # Skip over the data and write its last byte, so the file reaches its full length
        # with the rest left as a hole.
        fout.seek(self.nbytes - 1, 1)
        fout.write(b"\0")


class LayoutMaker(WeightMaker):
    """A WeightMaker that defers every matrix of `min_elements` entries or more (see
    Deferred); smaller tensors (norms, biases, convolution kernels, small projections) are
    made as WeightMaker makes them."""

    def __init__(self, seed: int, min_elements: int = 1 << 20) -> None:
        super().__init__(seed)
        self.min_elements = min_elements

    def mat(self, rows: int, cols: int, scale: float = 1.0) -> Any:
        if rows * cols >= self.min_elements:
            return Deferred(rows, cols)
        return super().mat(rows, cols, scale)

    def output_head(self, n_vocab: int, n_embd: int, logit_scale: float) -> Any:
        if n_vocab * n_embd >= self.min_elements:
            return self.mat(n_vocab, n_embd, logit_scale)
        return super().output_head(n_vocab, n_embd, logit_scale)
