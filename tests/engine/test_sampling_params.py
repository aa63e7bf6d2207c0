"""SamplingParams refuse what no answer can be sampled with, whoever builds them."""

from __future__ import annotations

import math

import pytest

from specchat.engine.types import MAX_TEMPERATURE, Controls, SamplingParams


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("temperature", -math.inf),
        ("temperature", MAX_TEMPERATURE + 0.01),
        ("temperature", -0.1),
        ("top_p", math.nan),
        ("top_p", 1.5),
        ("min_p", math.inf),
        ("top_k", -1),
    ],
)
def test_sampling_params_out_of_their_range_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        Controls("plain", 0, SamplingParams(**{field: value}))


def test_sampling_params_in_range_are_taken() -> None:
    params = SamplingParams(temperature=MAX_TEMPERATURE, top_p=0.0, min_p=1.0, top_k=40)
    assert Controls("plain", 0, params).sampling.temperature == MAX_TEMPERATURE
