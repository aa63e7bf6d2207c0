"""A hybrid target's answers can part from plain at a near-tie whatever the keys (its
verify pass's matrix products round apart from a one-token pass's): the API's `specchat`
object says so for that target, and says nothing of it for an attention target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specchat.engine.llamacpp.recurrent_state import HYBRID_NEAR_TIES
from specchat.tinyarch import write_tiny_qwen35
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import running_server
from tests.serve.test_openai_client import MESSAGES, client


def _stats(target: Path) -> dict[str, Any]:
    with running_server(target, None) as server:
        reply = client(server).chat.completions.create(
            model="m", messages=MESSAGES, temperature=0, max_tokens=4
        )
    extra: dict[str, Any] = reply.model_extra or {}
    return dict(extra["specchat"])


def test_the_specchat_object_says_a_hybrid_can_part_at_near_ties(tmp_path: Path) -> None:
    hybrid = write_tiny_qwen35(tmp_path / "q.gguf", seed=1, mtp=True)
    assert _stats(hybrid)["exactness"] == HYBRID_NEAR_TIES


def test_an_attention_target_says_nothing_of_it(tiny_models: TinyModels) -> None:
    assert "exactness" not in _stats(tiny_models.target)
