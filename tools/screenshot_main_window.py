"""Screenshot the main window mid-answer on the real default pair (run under Xvfb).

    xvfb-run -s "-screen 0 1400x900x24" .venv/bin/python tools/screenshot_main_window.py \
        --out resources/screenshots/main-window.png [--theme dark] [--ghosts] \
        [--scenario edit|explain] [--mode auto|draft|lookup|chain] [--after-tokens N]

Uses a throw-away SPECCHAT_HOME; the model files come from the user cache (fetch_pair).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from specchat import paths

#: A code edit: most of the answer is the input again, which drafting predicts well.
EDIT_REQUEST = """Add type hints to this function. Keep everything else the same and show \
the whole function:

```python
def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    averages = []
    total = 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        if index >= window - 1:
            averages.append(total / window)
    return averages
```"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--theme", default="light", choices=("light", "dark", "system"))
    parser.add_argument("--ghosts", action="store_true", help="show rejected drafts")
    parser.add_argument("--mode", default="draft")
    parser.add_argument(
        "--after-tokens",
        type=int,
        default=0,
        help="shoot this far into the last answer (0: at its end)",
    )
    parser.add_argument("--size", default="1366x768")
    parser.add_argument(
        "--scenario",
        default="edit",
        choices=("edit", "explain"),
        help="edit: a code-editing request (the answer repeats most of its input); "
        "explain: a one-line question, then a new function",
    )
    args = parser.parse_args()
    os.environ[paths.HOME_ENV] = tempfile.mkdtemp(prefix="specchat-shot-")

    from PySide6.QtCore import QTimer

    from specchat import settings as cfg
    from specchat.engine.drafting import parse_mode
    from specchat.models.catalog import get_pair
    from specchat.models.download import fetch_pair
    from specchat.store.conversations import ConversationStore
    from specchat.ui.window.application import apply_theme, create_application
    from specchat.ui.window.main_window import MainWindow

    app = create_application(sys.argv[:1])
    settings = cfg.Settings()
    settings.set(cfg.THEME, args.theme)
    settings.set(cfg.SHOW_REJECTED, args.ghosts)
    settings.set(cfg.MAX_TOKENS, 400)
    apply_theme(args.theme)
    store = ConversationStore()
    window = MainWindow(settings=settings, store=store, autoload=False)
    width, height = (int(v) for v in args.size.split("x"))
    window.resize(width, height)
    window.move(0, 0)
    window.show()
    files = fetch_pair("default", source="mirror")
    questions = (
        [EDIT_REQUEST]
        if args.scenario == "edit"
        else [
            "In one sentence: what is speculative decoding?",
            "Write a short Python function that checks whether a number is prime, "
            "then explain it in two sentences.",
        ]
    )
    tokens = [0]
    state = {"shot": False}

    def shoot() -> None:
        window.chat_view.flush()
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(args.out))
        print(f"saved {args.out} ({tokens[0]} tokens into the answer)", flush=True)
        window.stop()
        QTimer.singleShot(200, window.close)

    def on_round(update: object) -> None:
        if len(questions) or state["shot"] or args.after_tokens == 0:
            return
        tokens[0] += len(update.result.events)  # type: ignore[attr-defined]
        if tokens[0] >= args.after_tokens:
            state["shot"] = True
            QTimer.singleShot(120, shoot)

    def ask_next(*_: object) -> None:
        if questions:
            window.send(questions.pop(0))

    def on_loaded(_loaded: object) -> None:
        window.controls.set_mode(parse_mode(args.mode))
        window.controls.k_slider.setValue(4)
        ask_next()

    window.model_loaded.connect(on_loaded)

    def on_done(_done: object) -> None:
        if questions:
            ask_next()
        elif args.after_tokens == 0 and not state["shot"]:
            state["shot"] = True  # at the answer's end: its final figures
            QTimer.singleShot(120, shoot)

    window.answer_done.connect(on_done)
    window.service.round_ready.connect(on_round)
    window.load_files(files.target, files.draft, label=get_pair("default").name)
    code = app.exec()
    # As the app does: a llama.cpp call outlasting the window's bounded wait must end before
    # the interpreter destroys its thread, or Qt aborts the process.
    window.service.wait_stopped(timeout_s=60)
    store.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
