"""What a converted target costs in quality: agreement and KL against its source, batch noise."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from specchat.bench.prompts import BenchPrompt, load_prompts
from specchat.engine.llamacpp.compute_threads import workers_released
from specchat.engine.llamacpp.model import LlamaModel

#: Tokens of each bench prompt's text scored (teacher-forced); the shipped ten give ~500.
TOKENS_PER_PROMPT = 48
#: Batch sizes whose rows are compared with the same positions decoded one at a time.
NOISE_SIZES = (2, 4, 8, 16, 32)
#: Cached tokens before batch noise is measured: past the 512 keys from which llama.cpp's CPU
#: attention for one token can take another path than a batch's (engine/llamacpp/model.py,
#: EXACT_KEY_TYPE), so the figure is the one a conversation sees, not a short prompt's.
NOISE_CONTEXT = 600
#: general.file_type number -> the name people know (llama.h's llama_ftype).
FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    25: "IQ4_NL",
    30: "IQ4_XS",
    32: "BF16",
}
REQUANT_NOTE = (
    "Made from an already quantised file, so its weights are quantised twice: a little worse "
    "than a Q4_0 file made from the full weights (the hub publishes those)."
)
FULL_WEIGHTS_NOTE = "Made from unquantised weights: a single quantisation."


class QualityCancelled(Exception):
    """The measurement was cancelled."""


@dataclass(frozen=True)
class QualityReport:
    """A derived file measured against its source on the bench's texts.

    Attributes:
        source, derived: file names.
        source_format, derived_format: "Q4_K_M", "Q4_0"...
        tokens: positions scored (teacher-forced: each row predicts the text's next token).
        agreement: share of positions where both files' most likely next token is the same.
        mean_kl: mean KL(source ‖ derived) in nats per position.
        max_kl: the largest KL at one position.
        batch_noise: per format, the largest |logit| difference between a batched row and
            the same position decoded alone, by batch size (0 = bit-identical).
        requantised: the source was quantised already (double quantisation).
        note: one sentence on what that means.
        seconds: how long the measurement took.
    """

    source: str
    derived: str
    source_format: str
    derived_format: str
    tokens: int
    agreement: float
    mean_kl: float
    max_kl: float
    batch_noise: dict[str, dict[int, float]]
    requantised: bool
    note: str
    seconds: float

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["batch_noise"] = {
            fmt: {str(n): v for n, v in noise.items()} for fmt, noise in self.batch_noise.items()
        }
        return data

    @classmethod
    def from_json(cls, data: dict[str, object]) -> QualityReport:
        noise = data["batch_noise"]
        assert isinstance(noise, dict)
        values = dict(data)
        values["batch_noise"] = {
            fmt: {int(n): float(v) for n, v in per.items()} for fmt, per in noise.items()
        }
        return cls(**values)  # type: ignore[arg-type]

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> QualityReport:
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    def summary(self) -> str:
        """The report in two sentences, for the model picker."""
        worst = {fmt: max(per.values(), default=0.0) for fmt, per in self.batch_noise.items()}
        noise = ", ".join(
            f"{fmt} {'0 (identical)' if value == 0 else f'{value:.2g}'}"
            for fmt, value in worst.items()
        )
        return (
            f"Against {self.source_format}: {self.agreement * 100:.1f} % next-token agreement, "
            f"mean KL {self.mean_kl:.3f} nats ({self.tokens} positions of the bench's texts); "
            f"batch noise {noise}. {self.note}"
        )

    def lines(self) -> list[str]:
        """The report in words, for the terminal and the model picker."""
        out = [
            f"next-token agreement with {self.source_format}: {self.agreement * 100:.1f} % "
            f"over {self.tokens} positions of the bench's texts",
            f"mean KL divergence: {self.mean_kl:.4f} nats per token (largest {self.max_kl:.3f})",
        ]
        for fmt, noise in self.batch_noise.items():
            worst = max(noise.values(), default=0.0)
            sizes = max(noise, default=0)
            verdict = (
                f"batched rows identical to single-token rows up to n = {sizes} "
                f"after {NOISE_CONTEXT} cached tokens"
                if worst == 0
                else f"batched rows differ from single-token rows by up to {worst:.3g} logits"
            )
            out.append(f"{fmt}: {verdict}")
        out.append(self.note)
        return out


def file_format(model: LlamaModel) -> str:
    raw = model.metadata("general.file_type")
    try:
        return FILE_TYPES.get(int(raw or ""), f"type {raw}")
    except ValueError:
        return "unknown"


def texts(prompts: Sequence[BenchPrompt]) -> list[str]:
    """The prompts' own words (system and user), the text the files are scored on."""
    return [f"{p.system}\n\n{p.user}" if p.system else p.user for p in prompts]


def _log_softmax(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float64)
    shifted = rows - rows.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def compare_rows(source: np.ndarray, derived: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether the argmax agrees, and KL(source ‖ derived) in nats."""
    log_p = _log_softmax(source)
    log_q = _log_softmax(derived)
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=1)
    agree = source.argmax(axis=1) == derived.argmax(axis=1)
    return agree, np.maximum(kl, 0.0)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise QualityCancelled("quality measurement cancelled")


def batch_noise(
    model: LlamaModel,
    context: Sequence[int],
    *,
    sizes: Sequence[int] = NOISE_SIZES,
    cached: int = NOISE_CONTEXT,
    cancel: threading.Event | None = None,
) -> dict[int, float]:
    """Largest |logit| gap between a batch's rows and the same positions decoded alone, after
    `cached` tokens of `context` (repeated where shorter; fewer where the window is smaller).

    llama.cpp picks other kernels for batches than for one token; where they round
    differently, a greedy choice with a margin below twice this can flip in verification.
    The cache is left holding the `cached` tokens.
    """
    longest = max(sizes)
    cached = max(1, min(cached, model.n_ctx - longest - 1))
    text = list(context) or [0]
    text = (text * (1 + (cached + longest) // len(text)))[: cached + longest]
    head, filler = text[:cached], text[cached:]
    model.reset()
    model.decode(head, logits="none")
    base = model.n_past
    single_rows = []
    for token in filler:
        _check(cancel)  # a window closing waits for this: one token at a time
        single_rows.append(model.decode([token], logits="all")[0])
    singles = np.stack(single_rows)
    model.truncate(base)
    noise = {}
    for n in sizes:
        _check(cancel)
        rows = model.decode(filler[:n], logits="all")
        model.truncate(base)
        noise[n] = float(np.abs(rows - singles[:n]).max())
    return noise


def measure_quality(
    source: Path,
    derived: Path,
    *,
    prompts: Sequence[BenchPrompt] | None = None,
    tokens_per_prompt: int = TOKENS_PER_PROMPT,
    requantised: bool,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> QualityReport:
    """Score `derived` against `source` on the bench's texts, and both files' batch noise.

    `progress(done, total)` counts prompts scored plus the two noise measurements.
    """
    began = time.monotonic()
    prompts = load_prompts() if prompts is None else prompts
    corpus = texts(prompts)
    total = len(corpus) + 2
    n_ctx = max(NOISE_CONTEXT + max(NOISE_SIZES) + 1, tokens_per_prompt + 64)
    # It runs on a thread of its own in the window (Optimise), which answers on another.
    with (
        workers_released(),
        LlamaModel(source, n_ctx=n_ctx, n_threads=threads) as original,
        LlamaModel(derived, n_ctx=n_ctx, n_threads=threads) as converted,
    ):
        agree: list[np.ndarray] = []
        kl: list[np.ndarray] = []
        longest: list[int] = []
        for done, text in enumerate(corpus):
            tokens = original.tokenize(text)[:tokens_per_prompt]
            if len(tokens) > len(longest):
                longest = tokens
            rows = []
            for model in (original, converted):
                _check(cancel)
                model.reset()
                rows.append(model.decode(tokens, logits="all"))
            a, k = compare_rows(rows[0], rows[1])
            agree.append(a)
            kl.append(k)
            if progress:
                progress(done + 1, total)
        noise: dict[str, dict[int, float]] = {}
        for step, model in enumerate((original, converted)):
            label = file_format(model)
            if label in noise:  # two files of one format: keep them apart
                label = f"{label} ({Path(model.path).name})"
            noise[label] = batch_noise(model, longest, cancel=cancel)
            if progress:
                progress(len(corpus) + step + 1, total)
        all_agree = np.concatenate(agree)
        all_kl = np.concatenate(kl)
        return QualityReport(
            source=source.name,
            derived=derived.name,
            source_format=file_format(original),
            derived_format=file_format(converted),
            tokens=int(all_agree.size),
            agreement=round(float(all_agree.mean()), 5),
            mean_kl=round(float(all_kl.mean()), 6),
            max_kl=round(float(all_kl.max()), 5),
            batch_noise={f: {n: round(v, 5) for n, v in per.items()} for f, per in noise.items()},
            requantised=requantised,
            note=REQUANT_NOTE if requantised else FULL_WEIGHTS_NOTE,
            seconds=round(time.monotonic() - began, 2),
        )
