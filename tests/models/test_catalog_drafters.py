"""models.toml's `drafter` and `checked`: what each drafter needs, errors that name the line, and
the shipped pairs that use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.models.catalog import CatalogError, load_catalog, parse_catalog
from specchat.models.drafter_kinds import DrafterKind

PAIR = """\
schema = 1

[[pair]]
id = "mine"
name = "My pair"
{pair_keys}

[pair.target]
repo = "me/target-GGUF"
file = "target.gguf"
{draft}"""
DRAFT = """
[pair.draft]
repo = "me/draft-GGUF"
file = "draft.gguf"
"""


def _text(pair_keys: str = "", *, draft: bool = True) -> str:
    return PAIR.format(pair_keys=pair_keys, draft=DRAFT if draft else "")


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_pair_without_drafter_uses_its_draft_model_and_is_checked() -> None:
    (pair,) = parse_catalog(_text())
    assert pair.drafter is DrafterKind.DRAFT_MODEL and pair.checked
    assert pair.draft is not None and pair.draft.filename == "draft.gguf"
    assert [role for role, _ in pair.files()] == ["target", "draft"]


def test_an_mtp_pair_has_no_draft_file() -> None:
    (pair,) = parse_catalog(_text('drafter = "mtp"\nchecked = false', draft=False))
    assert pair.drafter is DrafterKind.MTP and pair.draft is None and not pair.checked
    assert [(role, model.filename) for role, model in pair.files()] == [("target", "target.gguf")]


def test_an_assistant_pair_names_its_assistant_as_the_draft_file() -> None:
    (pair,) = parse_catalog(_text('drafter = "assistant"'))
    assert pair.drafter is DrafterKind.ASSISTANT
    assert pair.draft is not None and pair.draft.repo == "me/draft-GGUF"
    assert [role for role, _ in pair.files()] == ["target", "draft"]


@pytest.mark.parametrize(
    ("pair_keys", "draft", "needle", "message"),
    [
        (
            'drafter = "eagle"',
            True,
            'drafter = "eagle"',
            "pair 'mine': drafter 'eagle' must be one of draft-model, mtp, assistant",
        ),
        ("drafter = 3", True, "drafter = 3", "pair 'mine': 'drafter' must be str, not int"),
        (
            'drafter = "mtp"',
            True,
            "[pair.draft]",
            "pair 'mine': drafter 'mtp' drafts with the target's own MTP head; "
            "remove the [pair.draft] table",
        ),
        (
            'drafter = "assistant"',
            False,
            "[[pair]]",
            "pair 'mine': missing [pair.draft] table (the assistant file)",
        ),
        (
            'drafter = "draft-model"',
            False,
            "[[pair]]",
            "pair 'mine': missing [pair.draft] table",
        ),
        ('checked = "no"', True, 'checked = "no"', "pair 'mine': 'checked' must be bool, not str"),
    ],
)
def test_drafter_errors_name_the_line(
    pair_keys: str, draft: bool, needle: str, message: str
) -> None:
    text = _text(pair_keys, draft=draft)
    with pytest.raises(CatalogError) as caught:
        parse_catalog(text, source="models.toml")
    error = str(caught.value)
    assert error.startswith(f"models.toml line {_line_of(text, needle)}: "), error
    assert error.endswith(message), error


def test_an_mtp_pair_refuses_an_inline_draft_table_on_its_line() -> None:
    text = _text('drafter = "mtp"\ndraft = { repo = "me/d-GGUF", file = "d.gguf" }', draft=False)
    with pytest.raises(CatalogError, match=rf"line {_line_of(text, 'draft = {')}: .*MTP head"):
        parse_catalog(text)


def test_the_shipped_catalog_offers_each_drafter_with_unchecked_new_pairs(tmp_path: Path) -> None:
    catalog = load_catalog(user=tmp_path / "none.toml")
    gemma = catalog.get("gemma-4-e2b-assistant")
    assert gemma.drafter is DrafterKind.ASSISTANT and not gemma.checked
    assert gemma.target.repo == "unsloth/gemma-4-E2B-it-GGUF"
    assert gemma.draft is not None
    assert gemma.draft.repo == "srmiles/gemma-4-E2B-it-assistant-GGUF"
    assert gemma.draft.approx_size == "170 MB"

    mtp = catalog.get("qwen3.5-4b-mtp")
    assert mtp.drafter is DrafterKind.MTP and mtp.draft is None and not mtp.checked
    assert mtp.target.filename == "Qwen3.5-4B-MTP-Q4_K_M.gguf"
    assert mtp.target.approx_size == "2.7 GB"

    qwen = catalog.get("qwen3.5-9b")
    assert qwen.drafter is DrafterKind.DRAFT_MODEL and not qwen.checked
    assert qwen.draft is not None and qwen.draft.filename == "Qwen3.5-0.8B-Q8_0.gguf"

    new = {"gemma-4-e2b-assistant", "qwen3.5-4b-mtp", "qwen3.5-9b"}
    for pair in catalog:
        # The new pairs were never downloaded where they were written: none claims a hash.
        if pair.id in new:
            assert all(model.sha256 is None for _, model in pair.files()), pair.id
        else:  # the pairs already shipped are as they were
            assert pair.drafter is DrafterKind.DRAFT_MODEL and pair.checked, pair.id
