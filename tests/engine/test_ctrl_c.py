"""Ctrl-C during a model load: held while llama.cpp calls back into Python, never lost."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from specchat.engine.llamacpp.ctrl_c import ctrl_c_held
from specchat.engine.llamacpp.model import LlamaModel


@pytest.fixture(autouse=True)
def python_handles_ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler, as in a terminal's foreground job (a job started in the
    background by a non-interactive shell inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_inside_the_block_is_raised_when_it_ends_after_the_cleanup() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), ctrl_c_held(lambda: steps.append("cleanup")):
        signal.raise_signal(signal.SIGINT)  # as if pressed while llama.cpp logs a line
        steps.append("went on")
    assert steps == ["went on", "cleanup"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_quiet_block_changes_nothing() -> None:
    with ctrl_c_held(lambda: pytest.fail("no cleanup without Ctrl-C")):
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_from_a_load_callback_is_not_dropped(tiny_models) -> None:  # type: ignore[no-untyped-def]
    """ctypes prints and drops an exception raised in a callback: pressed while llama.cpp
    reports load progress, Ctrl-C used to vanish and the load went on."""
    pressed = []

    def progress(share: float) -> None:
        if not pressed:
            pressed.append(share)
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        LlamaModel(tiny_models.target, n_ctx=256, progress=progress)
    assert pressed
