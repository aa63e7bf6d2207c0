"""Screenshot the whole screen with the model picker open on one catalog pair, to check how its
list and detail column show the pair's drafter (run under Xvfb).

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python tools/screenshot_model_picker.py \
        --out /tmp/picker.png [--pair qwen3.5-4b-mtp] [--theme dark]

Uses a throw-away SPECCHAT_HOME and hub cache, so every pair shows as not downloaded, and asks
the hub nothing: it runs offline in seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from specchat import paths


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pair", default="gemma-4-e2b-assistant", help="the pair to select")
    parser.add_argument("--theme", default="light", choices=("light", "dark", "system"))
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="specchat-shot-"))
    os.environ[paths.HOME_ENV] = str(home)
    os.environ["HF_HUB_CACHE"] = str(home / "hub")
    os.environ["SPECCHAT_MODEL_CACHE"] = str(home / "model-cache")
    os.environ["HF_HUB_OFFLINE"] = "1"

    from PySide6.QtCore import QTimer

    from specchat import settings as cfg
    from specchat.ui.pairs.model_picker import ModelPicker
    from specchat.ui.window.application import apply_theme, create_application

    app = create_application(sys.argv[:1])
    settings = cfg.Settings()
    settings.set(cfg.THEME, args.theme)
    apply_theme(args.theme)
    picker = ModelPicker(None, settings=settings, ask_hub_sizes=False)
    picker.move(0, 0)
    picker.show()
    picker.select(args.pair)
    if picker.selected_key() != args.pair:
        print(f"no pair {args.pair!r} in the catalog", file=sys.stderr)
        return 2

    def shoot() -> None:
        app.processEvents()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        app.primaryScreen().grabWindow(0).save(str(args.out))
        print(f"saved {args.out}: picker {picker.width()}x{picker.height()}", flush=True)
        QTimer.singleShot(200, picker.close)

    # After the survey has said what is on disk (a few file lookups on the worker).
    QTimer.singleShot(1500, shoot)
    app.exec()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
