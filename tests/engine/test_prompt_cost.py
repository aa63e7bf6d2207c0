"""A template whose output would cost gigabytes to tokenize is refused before tokenizing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specchat.tinymodels import TinySpec, write_tiny_model

#: Just under the sandbox's 4,000,000-character output limit, in 4-byte characters: 16 MB
#: of prompt, about 16 million tokens in a byte-level vocabulary.
HUGE = "{{ '\U0001f600' * 3990000 }}{% for m in messages %}{{ m.content }}{% endfor %}"
PLAIN = "{% for m in messages %}{{ m.content }}{% endfor %}"

#: Runs `specchat generate` in this process, then prints its peak resident memory in KiB.
RUN = (
    "import resource, sys\n"
    "from specchat.cli import main\n"
    "code = main(['generate', '--target', sys.argv[1], '--n-ctx', '256', '--max-tokens', '2',"
    " '--mode', 'plain', '--threads', '1', '--prompt', 'hi'])\n"
    "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def generate(model: Path) -> tuple[int, int, str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(model)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ,
    )
    peak = int(done.stdout.split("peak")[-1])
    return done.returncode, peak, done.stderr


def test_a_template_writing_16_mb_is_refused_before_tokenizing(tmp_path: Path) -> None:
    plain = write_tiny_model(tmp_path / "plain.gguf", TinySpec(chat_template=PLAIN))
    huge = write_tiny_model(tmp_path / "huge.gguf", TinySpec(chat_template=HUGE))
    code, baseline, _ = generate(plain)
    assert code == 0
    code, peak, err = generate(huge)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("specchat:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert "chat template wrote 15,960,002 bytes for 2 bytes of messages" in lines[0]
    assert "not your message" in lines[0]
    # The rendered text crosses the pipe from the template host (16 MB as UTF-8, 16 MB as
    # a str): tens of MB, where tokenizing it took 1.7 GB.
    assert peak - baseline < 120 * 1024, f"{(peak - baseline) / 1024:.0f} MiB over a plain run"
