"""Tiny GGUF files for the drafters that are not a draft model, and a catalog that serves them.

An MTP target is the tiny target claiming one multi-token-prediction layer in its metadata;
an assistant is a file of an assistant architecture with no vocabulary. Neither is meant to
draft: they let the catalog, the downloads and the checks be tested without the real models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specchat.tinymodels import TinySpec, write_tiny_model
from tests.helpers.fake_hub import FakeHub

REPO = "specchat-tests/tiny-drafters-GGUF"
MTP_PAIR_ID = "tiny-mtp"
ASSISTANT_PAIR_ID = "tiny-assistant"


def write_mtp_target(path: Path, *, layers: int = 1) -> Path:
    """The tiny target, claiming `layers` MTP layers (llama.nextn_predict_layers)."""
    spec = TinySpec(seed=1, name="tiny-mtp-target")
    return write_tiny_model(path, spec, extra={"llama.nextn_predict_layers": layers})


def write_bare_model(path: Path, architecture: str) -> Path:
    """A valid GGUF of `architecture` with one small tensor and no tokenizer (an assistant
    has none; a target of another architecture needs none to be told apart)."""
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def serve_drafter_pairs(hub: FakeHub, directory: Path, catalog: Path) -> dict[str, Path]:
    """Serve an MTP target and an assistant pair on `hub` and write a catalog naming them.

    Pair "tiny-mtp" is the MTP target alone (drafter = "mtp", no draft file); pair
    "tiny-assistant" is a gemma4 target with a gemma4-assistant file. Returns the files by
    name ("mtp_target", "gemma4_target", "assistant").
    """
    files = {
        "mtp_target": write_mtp_target(directory / "tiny-mtp-target.gguf"),
        "gemma4_target": write_bare_model(directory / "tiny-gemma4.gguf", "gemma4"),
        "assistant": write_bare_model(directory / "tiny-assistant.gguf", "gemma4-assistant"),
    }
    for path in files.values():
        hub.add(REPO, path.name, path.read_bytes())
    catalog.parent.mkdir(parents=True, exist_ok=True)
    catalog.write_text(
        f"""schema = 1

[[pair]]
id = "{MTP_PAIR_ID}"
name = "Tiny target with its MTP head"
drafter = "mtp"
checked = false
k = 2

[pair.target]
repo = "{REPO}"
file = "{files["mtp_target"].name}"
size = {files["mtp_target"].stat().st_size}
quantisation = "F32"
params = "1M"
licence = "mit"

[[pair]]
id = "{ASSISTANT_PAIR_ID}"
name = "Tiny gemma4 target + assistant"
drafter = "assistant"

[pair.target]
repo = "{REPO}"
file = "{files["gemma4_target"].name}"

[pair.draft]
repo = "{REPO}"
file = "{files["assistant"].name}"
params = "0.1M"
""",
        encoding="utf-8",
    )
    return files
