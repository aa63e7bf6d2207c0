"""The peers section of the bench report and the configurations a pair gets (no models)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specchat.bench.live.records import RunRecord, Variant
from specchat.bench.peers.configs import (
    DRAFT_SIMPLE_DEFAULT,
    PYTHON_LOOKUP,
    PYTHON_PLAIN,
    SERVER_PLAIN,
    SPECCHAT_SERVE,
    peer_configs,
)
from specchat.bench.peers.llama_server import LlamaServer, ServerSettings, find_llama_server
from specchat.bench.peers.peers_table import (
    peers_section,
    render_peers,
    specchat_rows,
    summary_lines,
)
from specchat.bench.peers.run import PeerRecord
from specchat.bench.peers.server_process import ChatReply, PeerError
from specchat.bench.peers.specchat_server import SpecChatServer
from specchat.own_program import own_program


def _peer(peer: str, prompt: str, tok_s: float, repeat: int = 0, **kw: object) -> PeerRecord:
    return PeerRecord(peer, prompt, "chat", repeat, tokens=10, tok_s=tok_s, **kw)  # type: ignore[arg-type]


def _specchat(mode: str, prompt: str, tok_s: float, text: str, repeat: int = 0) -> RunRecord:
    return RunRecord(
        prompt, "chat", Variant(mode, None), 0.0, repeat, tuple(range(10)), (), text, 10 / tok_s
    )


def test_section_speedups_equality_and_best_n_max() -> None:
    peers = [
        _peer(SERVER_PLAIN, "a", 10.0, text="A"),
        _peer(SERVER_PLAIN, "b", 20.0, text="B"),
        _peer("llama-server draft-simple n-max 2", "a", 12.0, text="A", drafted=8, accepted=6),
        _peer("llama-server draft-simple n-max 2", "b", 20.0, text="B"),
        _peer("llama-server draft-simple n-max 4", "a", 15.0, text="A"),
        _peer("llama-server draft-simple n-max 4", "b", 10.0, text="other"),
        _peer(PYTHON_PLAIN, "a", 0.0, error="could not load"),
        _peer(PYTHON_PLAIN, "b", 0.0, error="could not load"),
    ]
    specchat = specchat_rows(
        [
            _specchat("plain", "a", 9.0, "A"),
            _specchat("plain", "b", 20.0, "B"),
            _specchat("auto", "a", 20.0, "A"),
            _specchat("auto", "b", 22.0, "B"),
            _specchat("lookup", "a", 30.0, "A"),  # not shown: only plain and auto are
        ]
    )
    section = peers_section(peers, specchat, {"threads": 2, "ctx": 4096, "key_type": "q8_0"})
    per_set = section["set"]
    assert set(per_set) == {
        "SpecChat plain",
        "SpecChat auto",
        SERVER_PLAIN,
        "llama-server draft-simple n-max 2",
        "llama-server draft-simple n-max 4",
        PYTHON_PLAIN,
    }
    assert per_set[SERVER_PLAIN]["speedup"] == pytest.approx(1.0)
    assert per_set["SpecChat auto"]["speedup"] == pytest.approx((2.0 * 1.1) ** 0.5, rel=1e-3)
    assert per_set["SpecChat plain"]["worst_prompt"] == "a"
    # n-max 2: 1.2 and 1.0 (geomean 1.095); n-max 4: 1.5 and 0.5 (0.866): 2 is the best.
    assert section["best_draft_simple"] == "llama-server draft-simple n-max 2"
    assert per_set["llama-server draft-simple n-max 4"]["equal"] == 1
    assert per_set["llama-server draft-simple n-max 4"]["compared"] == 2
    assert per_set["llama-server draft-simple n-max 2"]["drafted"] == 8
    assert per_set[PYTHON_PLAIN]["errors"] == 2 and per_set[PYTHON_PLAIN]["speedup"] is None
    row = next(r for r in section["rows"] if r["peer"].endswith("n-max 4") and r["prompt"] == "b")
    assert row["equal_to_specchat_plain"] is False and row["speedup"] == pytest.approx(0.5)

    markdown = "\n".join(render_peers(section))
    assert "## Peers" in markdown
    assert "Best draft-simple n-max for this set: **2**" in markdown
    assert "chosen knowing these results" in markdown
    assert "| **SpecChat auto** |" in markdown
    assert "failed: could not load" in markdown
    assert render_peers(None) == []
    console = "\n".join(summary_lines(section))
    assert "llama-server draft-simple n-max 2" in console and "(best n-max for this set)" in console
    assert "2 failed" in console and summary_lines(None) == []


def test_specchat_rows_count_an_answer_as_llama_server_does() -> None:
    """An answer the model ended: its end token's pass is in the time, and llama-server counts
    the token, so SpecChat's rows count it too; an answer cut at max_tokens has none."""
    ended = replace(_specchat("plain", "a", 10.0, "A"), stop="eos")
    cut = replace(_specchat("plain", "b", 10.0, "B"), stop="max_tokens")
    rows = {r.prompt: r for r in specchat_rows([ended, cut])}
    assert rows["a"].tok_s == pytest.approx(11.0) and rows["a"].tokens == 10
    assert rows["b"].tok_s == pytest.approx(10.0)


def test_speedups_pair_by_pass() -> None:
    """A pass is compared with llama-server plain's same pass, not another's."""
    peers = [
        _peer(SERVER_PLAIN, "a", 10.0, repeat=0),
        _peer(SERVER_PLAIN, "a", 20.0, repeat=1),
        _peer(PYTHON_LOOKUP, "a", 10.0, repeat=0),
        _peer(PYTHON_LOOKUP, "a", 20.0, repeat=1),
    ]
    section = peers_section(peers, [], {})
    assert section["set"][PYTHON_LOOKUP]["speedup"] == pytest.approx(1.0)
    assert section["set"][PYTHON_LOOKUP]["compared"] == 0  # no SpecChat plain to compare with


def test_configs_for_a_draft_model_and_for_heads(tmp_path: Path) -> None:
    draft = tmp_path / "draft.gguf"
    names = [c.name for c in peer_configs(draft=draft)]
    assert names[:5] == [
        SERVER_PLAIN,
        SPECCHAT_SERVE["plain"],
        SPECCHAT_SERVE["auto"],
        "llama-server --spec-default",
        DRAFT_SIMPLE_DEFAULT,
    ]
    serve = next(c for c in peer_configs(draft=draft) if c.name == SPECCHAT_SERVE["auto"])
    assert (serve.specchat_mode, serve.draft, serve.is_server) == ("auto", draft, False)
    assert serve.shown_arguments == ("specchat serve", "speculative.mode=auto")
    assert [n for n in names if "n-max" in n] == [
        f"llama-server draft-simple n-max {n}" for n in (2, 4, 8)
    ]
    assert names[-2:] == [PYTHON_PLAIN, PYTHON_LOOKUP]
    simple = next(c for c in peer_configs(draft=draft) if c.name.endswith("n-max 8"))
    assert simple.server_args == (
        "--spec-type",
        "draft-simple",
        "-md",
        str(draft),
        "--spec-draft-n-max",
        "8",
    )
    # No draft: no draft-simple; the target's own MTP head needs no file.
    names = [c.name for c in peer_configs(draft=None, heads=("mtp",))]
    assert "llama-server draft-mtp" in names and not any("draft-simple" in n for n in names)
    # An EAGLE-3 file is a head, not a draft model: llama-server drafts with it as one.
    configs = peer_configs(draft=draft, heads=("eagle3",))
    assert not any("draft-simple" in c.name for c in configs)
    eagle = next(c for c in configs if c.name == "llama-server draft-eagle3")
    assert eagle.server_args == ("--spec-type", "draft-eagle3", "-md", str(draft))


def test_server_settings_and_timings(tmp_path: Path) -> None:
    settings = ServerSettings(tmp_path / "t.gguf", threads=2, ctx=4096, key_type="q8_0")
    args = settings.arguments()
    assert args[args.index("-t") + 1] == "2" and args[args.index("-ctk") + 1] == "q8_0"
    assert args[args.index("-c") + 1] == "4096" and args[args.index("-np") + 1] == "1"
    reply = ChatReply("x", {"predicted_n": 11, "predicted_ms": 500.0, "draft_n": 4}, 1.0)
    # Ten tokens after the first in half a second.
    assert reply.decode_tok_s == pytest.approx(20.0)
    assert (reply.drafted, reply.accepted) == (4, 0)
    # SpecChat's timings count the first token's pass: eleven tokens in half a second.
    timed = ChatReply("x", {"predicted_n": 11, "predicted_ms": 500.0}, 1.0, first_pass_timed=True)
    assert timed.decode_tok_s == pytest.approx(22.0)


def test_specchat_serve_runs_on_the_settings_llama_server_gets(tmp_path: Path) -> None:
    """Both servers get the same files, threads, context, keys and offload; SpecChat's
    requests name the mode, llama-server's read every prompt afresh."""
    settings = ServerSettings(
        tmp_path / "t.gguf", threads=2, ctx=4096, key_type="q8_0", gpu_layers=-1
    )
    draft = tmp_path / "d.gguf"
    command = SpecChatServer(settings, draft, "plain").command(8123)
    assert command[:4] == [*own_program(), "serve"]
    for flag, value in {
        "--target": str(settings.target),
        "--draft": str(draft),
        "--threads": "2",
        "--ctx": "4096",
        "--kv-cache": "q8_0",
        "--port": "8123",
        "--host": "127.0.0.1",
    }.items():
        assert command[command.index(flag) + 1] == value, flag
    assert "--gpu-layers=-1" in command
    # Idle, it times nothing of its own while the other peers are timed beside it.
    assert "--no-idle-timing" in command
    assert "--draft" not in SpecChatServer(settings, None, "auto").command(8123)
    assert SpecChatServer(settings, draft, "plain").request_fields() == {
        "speculative": {"mode": "plain"}
    }
    server = LlamaServer(tmp_path / "llama-server", settings, ("--spec-default",))
    llama = server.command(8124)
    assert llama[llama.index("-ctk") + 1] == "q8_0" and llama[-2:] == ["--port", "8124"]
    assert server.request_fields() == {"cache_prompt": False}
    server.close()


def test_no_server_built_names_how_to_build_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import specchat.bench.peers.llama_server as server

    monkeypatch.setattr(server, "TOOLS_DIR", tmp_path)
    with pytest.raises(PeerError, match="make llama-tools"):
        find_llama_server("0.3.36")
    built = tmp_path / "0.3.36-server-abc" / "llama-server"
    built.parent.mkdir()
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    (built.parent / "cmake-args.txt").write_text("-DGGML_NATIVE=on\n")
    assert find_llama_server("0.3.36") == built
    with pytest.raises(PeerError):
        find_llama_server("0.3.36", "cuda")
