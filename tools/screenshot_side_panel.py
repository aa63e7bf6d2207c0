"""Screenshot the whole screen with a fresh profile's window after an auto answer, to check
that the side panel stays inside the window (run under Xvfb).

    xvfb-run -s "-screen 0 1366x768x24" .venv/bin/python tools/screenshot_side_panel.py \
        --out /tmp/side-panel.png [--theme dark] [--size 1180x760] [--narrowest] [--hybrid]

The window keeps its first-run size unless --size is given; --narrowest drags the splitter
until the panel is at its minimum width. Layout only: the pair is SpecChat's tiny generated
models (their answers are noise), so it runs anywhere in seconds. Uses a throw-away
SPECCHAT_HOME.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from specchat import paths

QUESTION = "Rename total to subtotal in cart.py and show the whole file"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--theme", default="light", choices=("light", "dark", "system"))
    parser.add_argument("--size", default="", help="WxH (default: the first-run size)")
    parser.add_argument("--narrowest", action="store_true", help="the panel at its minimum")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument(
        "--hybrid", action="store_true", help="a tiny Qwen3.5-style hybrid with an MTP head"
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="specchat-shot-"))
    os.environ[paths.HOME_ENV] = str(home)

    from PySide6.QtCore import QTimer

    from specchat import settings as cfg
    from specchat.store.conversations import ConversationStore
    from specchat.tinymodels import build_tiny_set
    from specchat.ui.window.application import apply_theme, create_application
    from specchat.ui.window.main_window import MainWindow

    app = create_application(sys.argv[:1])
    settings = cfg.Settings()
    settings.set(cfg.THEME, args.theme)
    settings.set(cfg.MAX_TOKENS, args.max_tokens)
    apply_theme(args.theme)
    store = ConversationStore()
    window = MainWindow(settings=settings, store=store, autoload=False)
    if args.size:
        width, height = (int(v) for v in args.size.split("x"))
        window.resize(width, height)
    window.move(0, 0)
    window.show()
    if args.narrowest:
        sizes = window.splitter.sizes()
        panel = window.side_panel.minimumWidth()
        window.splitter.setSizes([sizes[0], sum(sizes) - sizes[0] - panel, panel])
    tiny = build_tiny_set(home / "tiny")

    def shoot() -> None:
        window.chat_view.flush()
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        # The whole screen, not the window alone: what runs past the window's edge shows.
        app.primaryScreen().grabWindow(0).save(str(args.out))
        side = window.side_panel
        content = side.widget()
        assert content is not None
        print(
            f"saved {args.out}: window {window.width()}x{window.height()}, side panel "
            f"{side.width()} px (content {content.width()} px, viewport "
            f"{side.viewport().width()} px)",
            flush=True,
        )
        QTimer.singleShot(200, window.close)

    def on_loaded(_loaded: object) -> None:
        window.controls.set_mode("auto")
        window.send(QUESTION)

    window.model_loaded.connect(on_loaded)
    window.answer_done.connect(lambda _done: QTimer.singleShot(150, shoot))
    if args.hybrid:
        from specchat.tinyarch import write_tiny_qwen35

        hybrid = write_tiny_qwen35(home / "tiny" / "hybrid-mtp.gguf", mtp=True)
        window.load_files(hybrid, None, label="tiny hybrid with an MTP head")
    else:
        window.load_files(tiny.target, tiny.draft_close, label="tiny pair")
    code = app.exec()
    window.service.wait_stopped(timeout_s=60)
    store.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
