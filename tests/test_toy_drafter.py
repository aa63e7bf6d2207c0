"""A drafter added in one place (here) is a mode everywhere, and keeps greedy output exact.

The drafter below is registered inside this test and nowhere else: the window's mode list,
`specchat generate --mode`, `specchat bench --modes` and the decoder (fixed and auto) all find
it through the registry (engine/drafting/registry.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from pytestqt.qtbot import QtBot

from specchat.cli import main
from specchat.engine.drafting import (
    Draft,
    Drafter,
    Listing,
    LoadedPair,
    mode_names,
    register,
    unregister,
)
from specchat.engine.types import SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS, run
from tests.helpers.generate_cli import generate_on_tiny


class RepeatLastDrafter(Drafter):
    """Proposes the last token again, k times: often wrong, never costly."""

    name = "repeat"
    listing = Listing(label="Repeat the last token")

    def propose(
        self, context: Sequence[int], k: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> Draft:
        return Draft((context[-1],) * k, None, 0.0, self.name)


@pytest.fixture
def repeat() -> Iterator[type[RepeatLastDrafter]]:
    register(RepeatLastDrafter)
    try:
        yield RepeatLastDrafter
    finally:
        unregister(RepeatLastDrafter.name)


def test_it_is_in_the_window_mode_list(qtbot: QtBot, repeat: type[Drafter]) -> None:
    from specchat.ui.panels.controls import ControlsPanel

    panel = ControlsPanel()
    qtbot.addWidget(panel)
    box = panel.mode_box
    listed = {box.itemData(i): box.itemText(i) for i in range(box.count())}
    assert listed["repeat"] == "Repeat the last token"
    panel.set_mode("repeat")
    assert panel.state().mode == "repeat"
    assert panel.k_slider.isEnabled()  # a fixed mode: the user's K applies
    from specchat import settings

    assert "repeat" in settings.MODE.allowed()  # the Settings dialog's choice list


def test_greedy_output_is_plain_output(tiny_models: TinyModels, repeat: type[Drafter]) -> None:
    from specchat.engine.decoding.decoder import SpeculativeDecoder
    from specchat.engine.llamacpp.model import LlamaModel

    with (
        LlamaModel(tiny_models.target, n_ctx=512, n_threads=1) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=512, n_threads=1) as draft,
    ):
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
        assert "repeat" in decoder.drafters.names()
        for text in CHAT_PROMPTS:
            prompt = target.tokenize(text)
            plain = run(decoder, prompt, mode="plain", max_tokens=60)
            spec = run(decoder, prompt, mode="repeat", k=3, max_tokens=60)
            assert spec.tokens == plain.tokens, text
            assert {r.choice.mode for r in spec.rounds if r.drafted} == {"repeat"}
            assert spec.rounds[-1].stats.drafted > 0
            auto = run(decoder, prompt, mode="auto", max_tokens=60)
            assert auto.tokens == plain.tokens, text


def test_specchat_generate_mode(
    tiny_models: TinyModels, repeat: type[Drafter], capsys: pytest.CaptureFixture[str]
) -> None:
    plain, _ = generate_on_tiny(tiny_models, "plain", capsys)
    out, err = generate_on_tiny(tiny_models, "repeat", capsys)
    assert out == plain
    assert "drafted 0," not in err and "drafted " in err


def test_specchat_bench_modes(
    tiny_models: TinyModels, repeat: type[Drafter], tmp_path: Path
) -> None:
    assert "repeat" in mode_names()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "echo", "user": "one two one two"}) + "\n", "utf-8")
    out = tmp_path / "out"
    argv = [
        "bench",
        "--target",
        str(tiny_models.target),
        "--prompts",
        str(prompts),
        "--modes",
        "plain,repeat",
        "--k",
        "2",
        "--temperature",
        "0",
        "--max-tokens",
        "12",
        "--threads",
        "1",
        "--ctx",
        "512",
        "--no-floor",
        "--no-physical",
        "--out",
        str(out),
    ]
    assert main(argv) in (0, 1)  # 1: a speed goal failed, as a toy drafter may
    results = json.loads((out / "report.json").read_text(encoding="utf-8"))["results"]
    rows = [r for r in results if r["mode"] == "repeat"]
    assert rows and all(r["k"] == 2 and r["identical_to_plain"] for r in rows)
