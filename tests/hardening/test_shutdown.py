"""Closing the app while its worker is stuck in a long call never aborts the process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

#: The real app; once its window is up, the worker's thread is held in one 4-second call
#: (as in a llama.cpp decode that cannot be interrupted), then the window is closed. The
#: window waits only 2 s for the worker.
CHILD = textwrap.dedent(
    """
    import sys, time
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    from specchat.ui.window.application import create_application, run_app
    from specchat.ui.window.main_window import MainWindow

    app = create_application(["specchat"])

    def stall_then_close():
        window = next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))
        if not window.service.worker_thread.isRunning():
            print("worker thread not running", flush=True)
        QTimer.singleShot(0, window.service.worker, lambda: time.sleep(4))
        time.sleep(0.2)
        print("closing", flush=True)
        window.close()

    QTimer.singleShot(300, stall_then_close)
    code = run_app(["specchat"])
    print("exited", code, flush=True)
    sys.exit(code)
    """
)


def test_closing_while_the_worker_is_busy_ends_cleanly(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "SPECCHAT_HOME": str(tmp_path / "home"),
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    result = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
    )
    out = result.stdout + result.stderr
    assert "closing" in result.stdout, out
    assert "worker thread not running" not in result.stdout, out
    assert "Destroyed while thread" not in out
    assert result.returncode == 0, out
