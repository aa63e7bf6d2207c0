"""SpecChat's answer reader against llama.cpp's own reading of the same model outputs
(tests/fixtures/chat_oracle/parse: each vendored template's answers, parsed by its
common/chat.h, whole and streamed): every output reads alike whole and streamed, and reads
as llama.cpp reads it, whole and streamed."""

from __future__ import annotations

import pytest

from tests.helpers.oracle_parses import FIXTURES, ParseCase, parse_cases, read

CASES = list(parse_cases())


def test_the_fixtures_are_there() -> None:
    assert len(list((FIXTURES / "parse").glob("*.json"))) >= 60
    assert len(CASES) >= 250


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_every_output_reads_alike_whole_and_streamed_as_llama_cpp_cut_it(case: ParseCase) -> None:
    whole, streamed = read(case)
    assert streamed == whole


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_each_output_reads_as_llama_cpp_reads_it(case: ParseCase) -> None:
    whole, streamed = read(case)
    assert whole == case.expected
    # llama.cpp's own stream adds up to its whole reading, save where a malformed call
    # broke it (it streams the call, then errs at finding none): there SpecChat's stream
    # adds up to the whole reading, as it always does.
    assert streamed == (case.streamed or case.expected)
