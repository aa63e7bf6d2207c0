"""The Context and GPU section's RPC servers: what the field says before a reload, what the
last load found on each server after it, and the setting kept."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from specchat.engine.llamacpp import rpc_wire
from specchat.engine.llamacpp.rpc_wire import ServerInfo
from specchat.ui.panels.memory_section import MemorySection


def _section(qtbot: QtBot) -> MemorySection:
    section = MemorySection()
    qtbot.addWidget(section)
    return section


def test_servers_are_listed_with_their_free_memory_once_loaded(qtbot: QtBot) -> None:
    section = _section(qtbot)
    assert not section.rpc_note.text()
    section.set_rpc_servers("10.0.0.2:50052, 10.0.0.3")
    assert "Reload" in section.rpc_note.text()
    assert section.summary().endswith("2 RPC servers")
    rpc_wire.remember_servers(
        (
            ServerInfo("10.0.0.2:50052", (7, 0, 0), ((3 << 30, 4 << 30),)),
            ServerInfo("10.0.0.3:50052", (7, 0, 0), ((1 << 30, 2 << 30), (1 << 30, 2 << 30))),
        )
    )
    try:
        section.set_loaded(n_ctx=4096, kv_bytes_per_token=0)
        assert section.rpc_note.text().splitlines() == [
            "10.0.0.2:50052: 1 device, 3.0 GiB free",
            "10.0.0.3:50052: 2 devices, 2.0 GiB free",
        ]
    finally:
        rpc_wire.remember_servers(())


def test_a_list_that_is_not_servers_is_said_at_once(qtbot: QtBot) -> None:
    section = _section(qtbot)
    section.set_rpc_servers("box:http")
    assert section.rpc_note.text().startswith("Not a server list")
    assert "RPC" not in section.summary()
