"""`--rpc-loopback`'s OpenMP wait: a short spin for processes sharing the cores, unless the user
chose how OpenMP waits."""

from __future__ import annotations

import os

import pytest

from specchat.commands.bench_rpc import COLOCATED_SPIN_COUNT, colocated_wait_policy


@pytest.fixture(autouse=True)
def _no_openmp_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)


def test_processes_sharing_the_cores_spin_briefly_and_never_passively() -> None:
    colocated_wait_policy()
    assert os.environ["GOMP_SPINCOUNT"] == COLOCATED_SPIN_COUNT
    assert "OMP_WAIT_POLICY" not in os.environ


@pytest.mark.parametrize(
    ("name", "value"), [("OMP_WAIT_POLICY", "PASSIVE"), ("GOMP_SPINCOUNT", "300000")]
)
def test_what_the_user_set_stays(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    colocated_wait_policy()
    assert os.environ[name] == value
    other = "GOMP_SPINCOUNT" if name == "OMP_WAIT_POLICY" else "OMP_WAIT_POLICY"
    assert other not in os.environ
