"""A tiny target and an EAGLE-3 draft of it that agree part of the time, by construction.

Random weights make a draft the target rejects every time, so a run never takes the paths
of a partial or a full acceptance. Here the weights are made by hand:

- The target (tinymodels' llama layout) is a bigram model of a map f: its blocks add
  nothing (zero attention output and FFN down projection), and its output row for token u
  sums the embeddings of f's preimages of u, so after token t its argmax is f(t). f walks
  the draft vocabulary in chains c0 → c1 → ... → z that end at a fixed point f(z) = z;
  every other token leads to a chain's start.
- The EAGLE-3 draft's fc keeps the first target layer input (the token embedding at P: the
  blocks add nothing) as g[P], its block adds nothing either, and its output rows realise
  f∘f over the draft vocabulary. At position P it predicts f(f(t[P])) = t[P + 2]: the first
  draft token is right once the answer walks a chain; each further step reads the same g,
  so it repeats that token, which is right only at the chain's fixed point.

A generation then drafts wrong (none kept) at first, keeps one token a round along a
chain, and all K once the chain ends: every acceptance path of the draft's driver.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from specchat.engine.drafting.eagle3.eagle3_tiny import draft_vocabulary_ids
from specchat.tinyarch import write_tiny_eagle3
from specchat.tinymodels import TinySpec, vocabulary, write_tiny_model

SPEC = TinySpec(seed=1, name="tiny-chain-target")
#: Tokens in a chain before its fixed point.
CHAIN_LENGTH = 12
N_SPECIAL = 3
DRAFT_N_FF = 128


def _chain_map(n_vocab: int, rng: np.random.Generator) -> np.ndarray:
    """f over the whole vocabulary (see the module's docstring): the draft vocabulary's
    tokens and the others each walk chains of their own; a special token leads to the start
    of a chain."""
    in_draft = [t for t in draft_vocabulary_ids() if t >= N_SPECIAL]
    outside = sorted(set(range(N_SPECIAL, n_vocab)) - set(in_draft))
    f = np.empty(n_vocab, dtype=np.int64)
    heads = []
    for tokens in (in_draft, outside):
        order = [int(t) for t in rng.permutation(tokens)]
        for begin in range(0, len(order), CHAIN_LENGTH + 1):
            chain = order[begin : begin + CHAIN_LENGTH + 1]
            heads.append(chain[0])
            for a, b in itertools.pairwise(chain):
                f[a] = b
            f[chain[-1]] = chain[-1]
    f[:N_SPECIAL] = rng.choice(heads, size=N_SPECIAL, replace=False)
    return f


def _rows_realising(mapping: np.ndarray, embeddings: np.ndarray, outputs: list[int]) -> np.ndarray:
    """Output rows, one per id in `outputs`, whose argmax after token t is mapping[t] for
    every t that `outputs` can name."""
    rows = np.zeros((len(outputs), embeddings.shape[1]), dtype=np.float32)
    index = {token: i for i, token in enumerate(outputs)}
    named = [t for t, image in enumerate(mapping) if int(image) in index]
    for token in named:
        rows[index[int(mapping[token])]] += embeddings[token]
    normed = embeddings[named] / np.sqrt((embeddings[named] ** 2).mean(axis=1, keepdims=True))
    chosen = [outputs[i] for i in np.argmax(normed @ rows.T, axis=1)]
    assert chosen == [int(mapping[t]) for t in named], "the rows do not realise the map"
    return rows


def write_chain_pair(folder: Path, *, seed: int = 5) -> tuple[Path, Path]:
    """(target, EAGLE-3 draft) written into `folder`."""
    rng = np.random.default_rng(seed)
    n_vocab = len(vocabulary()[0])
    e, n_ff = SPEC.n_embd, SPEC.n_ff
    embeddings = rng.standard_normal((n_vocab, e)).astype(np.float32)
    f = _chain_map(n_vocab, rng)
    target_tensors = {"token_embd.weight": embeddings}
    for block in range(SPEC.n_layer):
        target_tensors[f"blk.{block}.attn_output.weight"] = np.zeros((e, e), dtype=np.float32)
        target_tensors[f"blk.{block}.ffn_down.weight"] = np.zeros((e, n_ff), dtype=np.float32)
    target_tensors["output.weight"] = _rows_realising(f, embeddings, list(range(n_vocab)))
    target = write_tiny_model(folder / "chain-target.gguf", SPEC, overrides=target_tensors)

    fc = np.zeros((e, 3 * e), dtype=np.float32)
    fc[:, :e] = np.eye(e, dtype=np.float32)
    draft_tensors = {
        "fc.weight": fc,
        "blk.0.attn_output.weight": np.zeros((e, e), dtype=np.float32),
        "blk.0.ffn_down.weight": np.zeros((e, DRAFT_N_FF), dtype=np.float32),
        "output.weight": _rows_realising(f[f], embeddings, draft_vocabulary_ids()),
    }
    draft = write_tiny_eagle3(
        folder / "chain-eagle3.gguf",
        target=SPEC,
        n_ff=DRAFT_N_FF,
        overrides=draft_tensors,
        name="chain-eagle3",
    )
    return target, draft
