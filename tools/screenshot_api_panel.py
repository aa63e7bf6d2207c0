"""Screenshot the window with "Serve API" on and two requests answered (run under Xvfb).

    xvfb-run -s "-screen 0 1400x900x24" .venv/bin/python tools/screenshot_api_panel.py \
        --out /tmp/api-panel.png [--theme dark] [--size 1366x768]

Layout only: the pair is SpecChat's tiny generated models (their answers are noise), so it
runs anywhere in seconds. Uses a throw-away SPECCHAT_HOME.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

from specchat import paths

QUESTIONS = (
    "Rename total to subtotal in cart.py and show the whole file",
    "What does apply_discount return when the code has expired?",
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--theme", default="light", choices=("light", "dark", "system"))
    parser.add_argument("--size", default="1366x768")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="specchat-shot-"))
    os.environ[paths.HOME_ENV] = str(home)

    import openai
    from PySide6.QtCore import QTimer

    from specchat import settings as cfg
    from specchat.store.conversations import ConversationStore
    from specchat.tinymodels import build_tiny_set
    from specchat.ui.window.application import apply_theme, create_application
    from specchat.ui.window.main_window import MainWindow

    app = create_application(sys.argv[:1])
    settings = cfg.Settings()
    settings.set(cfg.THEME, args.theme)
    settings.set(cfg.API_PORT, 0)  # any free port
    apply_theme(args.theme)
    store = ConversationStore()
    window = MainWindow(settings=settings, store=store, autoload=False)
    width, height = (int(v) for v in args.size.split("x"))
    window.resize(width, height)
    window.move(0, 0)
    window.show()
    tiny = build_tiny_set(home / "tiny")
    answered: list[int] = []

    def ask() -> None:
        server = window.api.server
        assert server is not None and server.address is not None
        client = openai.OpenAI(base_url=server.address.base_url, api_key="none")
        for question in QUESTIONS:
            stream = client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": question}],
                max_tokens=60,
                stream=True,
                extra_body={"speculative": {"mode": "draft", "k": 3}},
            )
            for _ in stream:
                pass
        answered.append(len(QUESTIONS))

    def shoot() -> None:
        if not answered:
            QTimer.singleShot(100, shoot)
            return
        window.api_panel.view.flush()
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(args.out))
        print(f"saved {args.out}", flush=True)
        window.api_panel.switch.setChecked(False)
        QTimer.singleShot(200, window.close)

    def on_loaded(_loaded: object) -> None:
        window.api_panel.switch.setChecked(True)
        threading.Thread(target=ask, daemon=True).start()
        QTimer.singleShot(300, shoot)

    window.model_loaded.connect(on_loaded)
    window.load_files(tiny.target, tiny.draft_close, label="tiny pair")
    code = app.exec()
    window.service.wait_stopped(timeout_s=60)
    store.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
