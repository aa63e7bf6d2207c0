"""A user catalog whose pairs are the tiny GGUF models, served by a FakeHub."""

from __future__ import annotations

from pathlib import Path

from specchat.tinymodels import TinyModels
from tests.helpers.fake_hub import FakeHub

REPO = "specchat-tests/tiny-GGUF"
PAIR_ID = "tiny"
ODD_PAIR_ID = "tiny-odd"


def serve_tiny_pair(hub: FakeHub, tiny: TinyModels, catalog: Path) -> Path:
    """Serve the tiny target and drafts on `hub` and write a catalog naming them.

    Pair "tiny" is the target with its close draft; "tiny-odd" pairs the target with the
    odd-vocabulary model (downloadable, but incompatible). Returns the catalog path.
    """
    for path in (tiny.target, tiny.draft_close, tiny.odd_vocab):
        hub.add(REPO, path.name, path.read_bytes())
    catalog.parent.mkdir(parents=True, exist_ok=True)
    catalog.write_text(
        f"""schema = 1

[[pair]]
id = "{PAIR_ID}"
name = "Tiny target + close draft"
mode = "draft"
k = 5
note = "Test models built by specchat.tinymodels."

[pair.target]
repo = "{REPO}"
file = "{tiny.target.name}"
size = {tiny.target.stat().st_size}
quantisation = "F32"
params = "1M"
licence = "mit"

[pair.draft]
repo = "{REPO}"
file = "{tiny.draft_close.name}"
quantisation = "F32"
params = "1M"
licence = "mit"

[[pair]]
id = "{ODD_PAIR_ID}"
name = "Tiny target + odd vocabulary"

[pair.target]
repo = "{REPO}"
file = "{tiny.target.name}"

[pair.draft]
repo = "{REPO}"
file = "{tiny.odd_vocab.name}"
""",
        encoding="utf-8",
    )
    return catalog
