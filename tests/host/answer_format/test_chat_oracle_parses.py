"""SpecChat's answer reader against llama.cpp's own reading of the same model outputs
(tests/fixtures/chat_oracle/parse: each vendored template's answers, parsed by its
common/chat.h, whole and streamed): every output reads alike whole and streamed, and reads
as llama.cpp reads it save for the formats SpecChat does not read and the differences
listed here, each with its reason."""

from __future__ import annotations

import pytest

from tests.helpers.oracle_parses import FIXTURES, ParseCase, parse_cases, read

CASES = list(parse_cases())

#: Templates whose answers llama.cpp reads in a format SpecChat does not (their calls are
#: read as Hermes', their thinking where it is `<think>`).
NOT_READ = {
    "Apriel-1.6-15b-Thinker-fixed": (
        "reasoning from the prompt's 'Here are my reasoning steps:' to [BEGIN FINAL RESPONSE]; "
        "llama.cpp reads an answer without the latter, its calls too, as reasoning"
    ),
    "muse-glimmer": "to=recipient messages",
}

#: Cases of the formats SpecChat reads that differ, and why.
DIFFERENT = {
    "malformed_call": (
        "a call whose value is no JSON where its schema wants JSON: llama.cpp's lenient parse "
        "drops the whole answer (no content, no call); SpecChat keeps the call, the value as "
        "a string (Qwen XML), or the text (Gemma 4)"
    ),
}
#: The templates (other than NOT_READ) each DIFFERENT case applies to.
DIFFERENT_IN = {
    "malformed_call": {
        "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "Qwen3-Coder",
        "Qwen3.5-4B",
        "StepFun3.5-Flash",
        "google-gemma-4-31B-it",
        "google-gemma-4-31B-it-interleaved",
    },
}


def _kind(case: ParseCase) -> str:
    return case.name if case.enable_thinking else f"{case.name}/no-thinking"


def _param(case: ParseCase) -> object:
    kind = _kind(case)
    if case.template in DIFFERENT_IN.get(kind, ()):
        return pytest.param(case, id=case.key, marks=pytest.mark.xfail(reason=DIFFERENT[kind]))
    return pytest.param(case, id=case.key)


def test_the_fixtures_are_there() -> None:
    assert len(list((FIXTURES / "parse").glob("*.json"))) >= 60
    assert len(CASES) >= 250


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_every_output_reads_alike_whole_and_streamed_as_llama_cpp_cut_it(case: ParseCase) -> None:
    whole, streamed = read(case)
    assert streamed == whole


@pytest.mark.parametrize("case", [_param(c) for c in CASES if c.template not in NOT_READ])
def test_each_output_reads_as_llama_cpp_reads_it(case: ParseCase) -> None:
    whole, _ = read(case)
    assert whole == case.expected


def test_the_lists_name_only_recorded_templates() -> None:
    recorded = {case.template for case in CASES}
    assert set(NOT_READ) <= recorded
    assert set().union(*DIFFERENT_IN.values()) <= recorded
