"""Screenshot the window with its target spread over an `specchat rpc-server` on loopback: the
Context and GPU section with the server and its free memory after a load, then the error
offering "Reload here" once that server is killed mid-answer (run under Xvfb).

    xvfb-run -s "-screen 0 1366x768x24" .venv/bin/python tools/screenshot_rpc.py \
        --out /tmp/rpc

Writes rpc-loaded.png and rpc-lost.png into --out. Layout only: the pair is SpecChat's tiny
generated models, so it runs anywhere in seconds. Uses a throw-away SPECCHAT_HOME.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specchat import paths


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    from specchat.engine.llamacpp.rpc_wire import RpcServerError, probe

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [sys.executable, "-m", "specchat", "rpc-server", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            probe(endpoint)
            return endpoint, process
        except RpcServerError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="specchat-shot-"))
    os.environ[paths.HOME_ENV] = str(home)

    from PySide6.QtCore import QTimer

    from specchat import settings as cfg
    from specchat.store.conversations import ConversationStore
    from specchat.tinymodels import build_tiny_set
    from specchat.ui.window.application import create_application
    from specchat.ui.window.main_window import MainWindow

    endpoint, server = start_server()
    app = create_application(sys.argv[:1])
    settings = cfg.Settings()
    settings.set(cfg.MAX_TOKENS, 400)
    store = ConversationStore()
    window = MainWindow(settings=settings, store=store, autoload=False)
    window.resize(1280, 760)
    window.move(0, 0)
    window.show()
    window.controls.memory_fold.set_open(True)
    window.controls.memory.set_rpc_servers(endpoint)
    tiny = build_tiny_set(home / "tiny")
    args.out.mkdir(parents=True, exist_ok=True)
    rounds = [0]

    def shoot(name: str) -> None:
        window.chat_view.flush()
        app.processEvents()
        app.primaryScreen().grabWindow(0).save(str(args.out / name))
        print(f"saved {args.out / name}", flush=True)

    def on_loaded(_loaded: object) -> None:
        window.model_loaded.disconnect(on_loaded)
        QTimer.singleShot(300, lambda: shoot("rpc-loaded.png"))
        window.controls.set_mode("plain")
        QTimer.singleShot(600, lambda: window.send("Tell me a long story"))

    def on_round(_update: object) -> None:
        rounds[0] += 1
        if rounds[0] == 3:
            server.kill()

    def shoot_lost_and_close() -> None:
        shoot("rpc-lost.png")
        window.close()  # the last window: app.exec() returns

    def on_error(_message: str) -> None:
        window.error_shown.disconnect(on_error)  # one picture of the lost server
        QTimer.singleShot(300, shoot_lost_and_close)

    window.model_loaded.connect(on_loaded)
    window.service.round_ready.connect(on_round)
    window.error_shown.connect(on_error)
    window.load_files(tiny.target, tiny.draft_close, label="tiny pair")
    code = app.exec()
    window.service.wait_stopped(timeout_s=60)
    store.close()
    server.kill()
    return code


if __name__ == "__main__":
    sys.exit(main())
