"""Bench prompts may carry a prediction: parsed, shipped as the 'predictions' set, and drafted
from when the bench runs them."""

from __future__ import annotations

import json
import re

import pytest

from specchat.bench.live.records import Variant
from specchat.bench.live.runner import BenchConfig, run_one
from specchat.bench.prompts import (
    PREDICTION_PROMPTS,
    BenchPrompt,
    PromptFileError,
    load_prompts,
    parse_prompts,
    prompt_file,
)
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.tinymodels import TinyModels


def test_the_predictions_set_pairs_each_edit_with_its_file() -> None:
    prompts = {p.id: p for p in load_prompts(prompt_file("predictions"))}
    assert prompt_file("predictions") == PREDICTION_PROMPTS
    predicted = [p for p in prompts.values() if p.id.endswith("-predicted")]
    assert predicted
    for prompt in predicted:
        code = re.search(r"```python\n(.*?)```", prompt.user, re.S)
        assert code is not None and prompt.prediction == code.group(1)
        base = prompt.id.removesuffix("-predicted")
        assert prompts[f"{base}-unpredicted"].prediction is None
        wrong = prompts[f"{base}-wrong-prediction"].prediction
        assert wrong and wrong not in prompt.user


def test_a_prediction_must_be_text() -> None:
    (prompt,) = parse_prompts(json.dumps({"id": "a", "user": "hi", "prediction": "hello"}))
    assert prompt.prediction == "hello"
    with pytest.raises(PromptFileError, match="prediction"):
        parse_prompts(json.dumps({"id": "a", "user": "hi", "prediction": 3}))


def test_the_bench_drafts_from_a_prompts_prediction(tiny_models: TinyModels) -> None:
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=512, n_threads=1)
    try:
        config = BenchConfig(modes=("plain", "prediction"), ks=(4,), max_tokens=40)
        ask = BenchPrompt("p", "hello there")
        tokens = engine.prepare([ChatMessage("user", "hello there")], max_tokens=40).tokens
        plain = run_one(
            engine, ask, tokens, Variant("plain", None), temperature=0.0, repeat=0, config=config
        )
        told = BenchPrompt("p", "hello there", prediction=plain.text)
        copied = run_one(
            engine,
            told,
            tokens,
            Variant("prediction", 4),
            temperature=0.0,
            repeat=0,
            config=config,
        )
    finally:
        engine.close()
    assert copied.tokens == plain.tokens
    assert copied.accepted > 0
    assert {log.origin for log in copied.round_logs if log.origin} == {"a prediction"}
