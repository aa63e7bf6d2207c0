"""`specchat serve` as a person runs it: a process that prints its address, answers, and
stops cleanly on Ctrl-C."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

from specchat.serve.server import Address
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import request


def test_serve_prints_its_address_answers_and_stops_on_ctrl_c(tiny_models: TinyModels) -> None:
    command = [sys.executable, "-m", "specchat", "serve", "--target", str(tiny_models.target)]
    command += ["--draft", str(tiny_models.draft_close), "--port", "0", "--ctx", "512"]
    command += ["--threads", "1"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        deadline = time.monotonic() + 120
        found = None
        while found is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
            found = re.search(r"serving tiny-target at http://127\.0\.0\.1:(\d+)/v1", line)
        assert found is not None
        address = Address("127.0.0.1", int(found.group(1)))
        assert request(address, "GET", "/health").status == 200
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
        reply = request(address, "POST", "/v1/chat/completions", body)
        assert reply.status == 200
        assert reply.json()["usage"]["completion_tokens"] <= 5
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert "Traceback" not in rest
