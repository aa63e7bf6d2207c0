"""The target files a pair can run: as shipped, in the catalog's CPU format, or a local copy."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from specchat.models.catalog import CatalogError, ModelPair, get_pair
from specchat.models.download import locate_file, resolve_pair_files
from specchat.models.optimise import derived_path


class TargetVariant(enum.Enum):
    """One way of holding a pair's target."""

    #: The target file the catalog names for the pair.
    SHIPPED = "target"
    #: The catalog's CPU-format file (Q4_0 published on the hub beside the shipped file).
    CPU = "cpu"
    #: The Q4_0 copy `specchat models optimise` made of the shipped file on this machine.
    OPTIMISED = "optimised"


@dataclass(frozen=True)
class TargetFile:
    """One target file of a pair and whether it is on disk.

    Attributes:
        variant: which of the pair's targets this is.
        path: where it is, or None when it is not on disk.
        filename: its file name (on disk, or at the hub).
        quantisation: its format, "Q4_K_M", "Q4_0"...
        reason: why it exists ("" for the shipped target).
    """

    variant: TargetVariant
    path: Path | None
    filename: str
    quantisation: str
    reason: str = ""


OPTIMISED_REASON = "made here from the shipped file by `specchat models optimise`"


def target_files(
    pair: ModelPair, *, cache_dir: Path | None = None, models_dir: Path | None = None
) -> tuple[TargetFile, ...]:
    """The shipped target, the catalog's CPU format (if any) and the local copy (if made)."""
    shipped = locate_file(pair.target, cache_dir=cache_dir, models_dir=models_dir)
    files = [
        TargetFile(
            TargetVariant.SHIPPED,
            None if shipped is None else shipped.path,
            pair.target.filename,
            pair.target.quantisation,
        )
    ]
    if pair.cpu_target is not None:
        cpu = locate_file(pair.cpu_target, cache_dir=cache_dir, models_dir=models_dir)
        files.append(
            TargetFile(
                TargetVariant.CPU,
                None if cpu is None else cpu.path,
                pair.cpu_target.filename,
                pair.cpu_target.quantisation,
                pair.cpu_reason,
            )
        )
    if shipped is not None:
        derived = derived_path(shipped.path, models_dir=models_dir)
        if derived.is_file():
            files.append(
                TargetFile(TargetVariant.OPTIMISED, derived, derived.name, "Q4_0", OPTIMISED_REASON)
            )
    return tuple(files)


def resolve_target(
    pair: ModelPair,
    variant: TargetVariant,
    *,
    cache_dir: Path | None = None,
    models_dir: Path | None = None,
) -> Path | None:
    """The file of `variant` if it is on disk, else None."""
    for file in target_files(pair, cache_dir=cache_dir, models_dir=models_dir):
        if file.variant is variant:
            return file.path
    return None


def parse_target_spec(spec: str) -> tuple[str, TargetVariant]:
    """ "default" → (default, shipped); "default:cpu", "default:optimised" → those variants."""
    pair_id, _, name = spec.strip().partition(":")
    if not name:
        return pair_id, TargetVariant.SHIPPED
    for variant in TargetVariant:
        if name == variant.value:
            return pair_id, variant
    names = ", ".join(v.value for v in TargetVariant)
    raise ValueError(f"{spec!r}: the part after ':' must be one of {names}")


class PairNotDownloaded(CatalogError):
    """A catalog pair whose files are not on disk yet; the message says how to get them."""


def variant_file(pair: ModelPair, name: str) -> Path | None:
    """The pair's target file of variant `name` ("target", "cpu", "optimised") if it is on
    disk, else None."""
    try:
        variant = TargetVariant(name)
    except ValueError:
        return None
    return resolve_target(pair, variant)


def pair_files(pair_id: str, *, variant: str = "target") -> tuple[Path, Path | None]:
    """The files to load for catalog pair `pair_id`: its target (of `variant` where that one
    is on disk, else the shipped one) and its draft.

    The one place a pair id becomes files, for the window's loads and the CLI alike. Raises
    CatalogError for an unknown id and PairNotDownloaded when the files are missing.
    """
    pair = get_pair(pair_id)
    files = resolve_pair_files(pair)
    if files is None:
        raise PairNotDownloaded(
            f"“{pair.name}” is not downloaded yet: open Models… to download it, or run "
            f"`specchat models fetch {pair.id}`."
        )
    return variant_file(pair, variant) or files.target, files.draft
