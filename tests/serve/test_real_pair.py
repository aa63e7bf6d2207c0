"""`specchat serve` on the real default pair: a whole-file edit sent with its prediction."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from specchat.cli import main
from tests.helpers.api_server import running_server

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

FILE = '''def total(items):
    """Sum the prices of the items."""
    result = 0
    for item in items:
        result += item.price
    return result


def describe(items):
    lines = []
    for item in items:
        lines.append(f"{item.name}: {item.price:.2f}")
    lines.append(f"total: {total(items):.2f}")
    return "\\n".join(lines)
'''
ASK = (
    f"Rename the function total to subtotal. Reply with the whole file only.\n```python\n{FILE}```"
)


def test_an_edit_with_its_file_as_prediction_is_plain_output_copied(
    real_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target, draft = real_pair
    args = ["generate", "--target", str(target), "--draft", str(draft), "--mode", "plain"]
    args += ["--max-tokens", "160", "--n-ctx", "2048", "--color", "never", "--prompt", ASK]
    assert main(args) == 0
    plain = capsys.readouterr().out[:-1]
    with running_server(target, draft, n_ctx=2048) as server:
        assert server.address is not None
        api = openai.OpenAI(base_url=server.address.base_url, api_key="none", max_retries=0)
        reply = api.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": ASK}],
            temperature=0,
            max_tokens=160,
            prediction={"type": "content", "content": FILE},
            timeout=600,
        )
    assert reply.choices[0].message.content == plain
    assert "def subtotal(items):" in plain
    assert reply.usage is not None and reply.usage.completion_tokens_details is not None
    details = reply.usage.completion_tokens_details
    assert details.accepted_prediction_tokens is not None
    assert details.accepted_prediction_tokens > 0
    # The file is in the prompt too, so which copy source a round takes is a pricing choice
    # that moves with the machine; what holds is that copying carried most of the answer.
    kept = (reply.model_extra or {})["specchat"]["kept_by_source"]
    copied = kept.get("prediction", 0) + kept.get("this chat", 0)
    assert copied > reply.usage.completion_tokens // 2
    timings = (reply.model_extra or {})["timings"]
    assert timings["draft_n_accepted"] >= details.accepted_prediction_tokens
