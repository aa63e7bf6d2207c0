"""bench/live/quality.py: agreement, KL and batch noise of a converted file, on real tiny models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specchat.bench.live.quality import (
    NOISE_CONTEXT,
    QualityReport,
    batch_noise,
    compare_rows,
    measure_quality,
    texts,
)
from specchat.bench.prompts import load_prompts
from specchat.engine.llamacpp.model import LlamaModel
from specchat.models.optimise import optimise
from specchat.tinymodels import TinyModels


@pytest.fixture(scope="module")
def converted(tiny_models: TinyModels, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("converted")
    return optimise(tiny_models.target, output=folder / "tiny.derived-q4_0.gguf").path


def test_compare_rows_is_zero_for_equal_rows_and_positive_otherwise() -> None:
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((4, 50)).astype(np.float32)
    agree, kl = compare_rows(rows, rows.copy())
    assert agree.all() and np.allclose(kl, 0.0)
    other = rows.copy()
    other[0, rows[0].argmax()] -= 100.0  # the top choice of row 0 disappears
    agree, kl = compare_rows(rows, other)
    assert list(agree) == [False, True, True, True]
    assert kl[0] > 0.1 and np.allclose(kl[1:], 0.0)


def test_the_texts_are_the_bench_prompts_words() -> None:
    prompts = load_prompts()
    corpus = texts(prompts)
    assert len(corpus) == len(prompts)
    assert all(p.user in text for p, text in zip(prompts, corpus, strict=True))


def test_a_file_against_itself_agrees_everywhere(tiny_models: TinyModels) -> None:
    report = measure_quality(tiny_models.target, tiny_models.target, requantised=False)
    assert report.agreement == 1.0 and report.mean_kl == 0.0
    # Both sides are one format: the noise is reported once per file.
    assert len(report.batch_noise) == 2


def test_converted_tiny_target_is_scored_honestly(
    tiny_models: TinyModels, converted: Path, tmp_path: Path
) -> None:
    steps: list[tuple[int, int]] = []
    report = measure_quality(
        tiny_models.target, converted, requantised=False, progress=lambda d, t: steps.append((d, t))
    )
    prompts = load_prompts()
    assert report.tokens == 48 * len(prompts)  # byte-level tokens: every prompt is longer
    assert (report.source_format, report.derived_format) == ("F32", "Q4_0")
    assert 0.0 < report.agreement < 1.0
    assert report.mean_kl > 0.0 and report.max_kl >= report.mean_kl
    assert set(report.batch_noise) == {"F32", "Q4_0"}
    assert all(v >= 0.0 for per in report.batch_noise.values() for v in per.values())
    assert steps[-1] == (len(prompts) + 2, len(prompts) + 2)
    # An unrelated model with the same vocabulary is much further away than the copy.
    far = measure_quality(tiny_models.target, tiny_models.draft_far, requantised=False)
    assert far.mean_kl > 2 * report.mean_kl and far.agreement < report.agreement
    # Stored beside the file and read back unchanged.
    path = tmp_path / "q.json"
    report.save(path)
    assert QualityReport.load(path) == report
    text = "\n".join(report.lines())
    assert "agreement" in text and "KL" in text and "single quantisation" in text


def test_requantised_reports_say_so(tiny_models: TinyModels, converted: Path) -> None:
    report = measure_quality(tiny_models.target, converted, requantised=True, tokens_per_prompt=8)
    assert "quantised twice" in report.note and "full weights" in report.note


def test_batch_noise_compares_batched_rows_with_single_ones(tiny_models: TinyModels) -> None:
    with LlamaModel(tiny_models.target, n_ctx=256) as model:
        context = model.tokenize("The quick brown fox jumps over the lazy dog, twice over.")
        noise = batch_noise(model, context, sizes=(2, 4, 8))
        assert set(noise) == {2, 4, 8}
        assert all(0.0 <= v < 0.1 for v in noise.values())  # float32 weights: rounding only
        # Measured after a conversation's length of (repeated) text, or what the window holds.
        assert model.n_past == min(NOISE_CONTEXT, model.n_ctx - 8 - 1)


def test_a_cancelled_measurement_stops(tiny_models: TinyModels, converted: Path) -> None:
    import threading

    from specchat.bench.live.quality import QualityCancelled

    cancel = threading.Event()
    calls: list[int] = []

    def progress(done: int, _total: int) -> None:
        calls.append(done)
        cancel.set()  # after the first text is scored

    with pytest.raises(QualityCancelled):
        measure_quality(
            tiny_models.target, converted, requantised=False, progress=progress, cancel=cancel
        )
    assert calls == [1]
