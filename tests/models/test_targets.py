"""models/target_files.py: the target as shipped, in the catalog's CPU format, the local copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.models.catalog import parse_catalog
from specchat.models.optimise import optimise
from specchat.models.target_files import (
    TargetVariant,
    parse_target_spec,
    resolve_target,
    target_files,
)
from specchat.tinymodels import TinyModels

CATALOG = """\
schema = 1

[[pair]]
id = "tiny"
name = "Tiny"

[pair.target]
repo = "t/t-GGUF"
file = "tiny-target.gguf"
quantisation = "F32"

[pair.cpu_target]
repo = "t/t-GGUF"
file = "tiny-target-q4_0.gguf"
quantisation = "Q4_0"

[pair.draft]
repo = "t/t-GGUF"
file = "tiny-draft.gguf"
"""


def test_variants_of_a_pair_and_which_are_on_disk(tiny_models: TinyModels, tmp_path: Path) -> None:
    (pair,) = parse_catalog(CATALOG)
    models, hub = tmp_path / "models", tmp_path / "hub"
    models.mkdir()
    where = {"cache_dir": hub, "models_dir": models}
    # Nothing on disk: the shipped and CPU files are offered, no local copy.
    files = target_files(pair, **where)
    assert [f.variant for f in files] == [TargetVariant.SHIPPED, TargetVariant.CPU]
    assert all(f.path is None for f in files)
    assert "price of 2" in files[1].reason
    shipped = models / "tiny-target.gguf"
    shipped.write_bytes(tiny_models.target.read_bytes())
    assert resolve_target(pair, TargetVariant.SHIPPED, **where) == shipped
    assert resolve_target(pair, TargetVariant.OPTIMISED, **where) is None
    made = optimise(shipped, output=models / "tiny-target.derived-q4_0.gguf").path
    files = target_files(pair, **where)
    assert [f.variant for f in files][-1] is TargetVariant.OPTIMISED
    assert resolve_target(pair, TargetVariant.OPTIMISED, **where) == made
    assert resolve_target(pair, TargetVariant.CPU, **where) is None


def test_target_specs() -> None:
    assert parse_target_spec("default") == ("default", TargetVariant.SHIPPED)
    assert parse_target_spec("default:cpu") == ("default", TargetVariant.CPU)
    assert parse_target_spec(" default:optimised ") == ("default", TargetVariant.OPTIMISED)
    with pytest.raises(ValueError, match="must be one of target, cpu, optimised"):
        parse_target_spec("default:fast")
