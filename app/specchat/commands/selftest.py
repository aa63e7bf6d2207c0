"""`specchat --self-test`: prove an install works end to end, with no network and no display."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specchat.commands import chat_format_check as chat_formats

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine

#: Tokens generated per mode: enough for several draft rounds, quick on any CPU.
MAX_TOKENS = 16
#: Draft length used for the speculative runs.
K = 3
#: Tokens of the hybrid model's runs: long enough that rejected drafts are rolled back
#: many times (a state that drifted would change the text).
HYBRID_TOKENS = 64
PROMPT = "hello world"
#: First line of the report, which scripts and the bundle test look for.
HEADER = "SpecChat self-test"
PASSED = "self-test passed"
FAILED = "self-test FAILED"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: what was checked.
        ok: whether it passed.
        detail: what it found, or why it failed.
    """

    name: str
    ok: bool
    detail: str


def _check_resources() -> str:
    from specchat import paths

    found = [
        paths.resource("icons", "specchat.svg"),
        paths.resource("icons", "specchat-256.png"),
        paths.resource("style", "light.qss"),
        paths.resource("style", "dark.qss"),
    ]
    return f"{len(found)} files in {paths.resources_dir()}"


def _check_catalog() -> str:
    from specchat import paths
    from specchat.models.catalog import parse_catalog

    # Only the shipped catalog: a user's own models.toml is not the install's business.
    shipped = paths.catalog_path()
    pairs = parse_catalog(shipped.read_text(encoding="utf-8"), source=shipped)
    return f"{len(pairs)} pairs in {shipped}"


def _check_backends() -> str:
    from specchat import ggml_backends
    from specchat.engine.llamacpp.backend import compute_backends

    backends = compute_backends()
    if not backends.cpu:
        raise RuntimeError(f"{backends.describe()} in {ggml_backends.lib_dir()}")
    return backends.describe()


def _generate(
    engine: ChatEngine, mode: str, max_tokens: int = MAX_TOKENS
) -> tuple[list[int], float, int]:
    """Token ids, acceptance rate and drafted tokens of one greedy generation."""
    from specchat.engine.types import Controls, GenerationRequest

    tokens: list[int] = []
    alpha = 0.0
    drafted = 0
    prompt = tuple(engine.tokenize_prompt(PROMPT))
    for result in engine.generate(GenerationRequest(prompt, max_tokens, Controls(mode, K))):
        tokens.extend(event.token for event in result.events)
        alpha = result.stats.alpha
        drafted = result.stats.drafted
    return tokens, alpha, drafted


def _matches_plain(
    name: str, tokens: list[int], plain: list[int], detail: str, drafted: int
) -> CheckResult:
    """A speculative run's check: it drafted, and wrote exactly plain decoding's tokens."""
    if tokens == plain and drafted > 0:
        return CheckResult(name, True, detail)
    if tokens == plain:
        return CheckResult(name, False, "it never drafted")
    first = next(
        (i for i, (a, b) in enumerate(zip(tokens, plain, strict=False)) if a != b),
        min(len(tokens), len(plain)),
    )
    found = f"differs from token {first}: {tokens[first : first + 4]} vs plain"
    return CheckResult(name, False, f"{found} {plain[first : first + 4]}")


def _engine_checks(workdir: Path) -> list[CheckResult]:
    """Load the tiny pair and check speculative decoding reproduces plain decoding."""
    from specchat.engine.session import ChatEngine
    from specchat.tinymodels import build_tiny_set

    results: list[CheckResult] = []
    clock = _Clock()
    tiny = build_tiny_set(workdir)
    built = clock.lap()
    # draft_close disagrees with the target now and then, so the run exercises rejection
    # and rollback, not only the all-accepted path. One thread: the models are too small to
    # gain from more, and spinning worker threads on a busy machine (CI) cost seconds a token.
    engine = ChatEngine.load(tiny.target, tiny.draft_close, n_ctx=512, n_threads=1)
    try:
        results.append(CheckResult("load tiny pair", True, f"built {built}, loaded {clock.lap()}"))
        plain, _, _ = _generate(engine, "plain")
        if not plain:
            results.append(CheckResult("plain decoding", False, "no tokens generated"))
            return results
        results.append(CheckResult("plain decoding", True, f"{len(plain)} tokens, {clock.lap()}"))
        for mode in ("draft", "lookup"):
            tokens, alpha, drafted = _generate(engine, mode)
            name = f"{mode} mode (K={K}) matches plain"
            detail = f"acceptance {alpha:.0%}, {clock.lap()}"
            results.append(_matches_plain(name, tokens, plain, detail, drafted))
    finally:
        engine.close()
    return results


def _hybrid_checks(workdir: Path) -> list[CheckResult]:
    """A tiny Qwen3.5-style hybrid (recurrent layers with an MTP head) drafts: with a hybrid
    draft model, rolling rejected drafts back, and from its own MTP head; both match plain."""
    from specchat.engine.session import ChatEngine
    from specchat.tinyarch import write_tiny_qwen35

    clock = _Clock()
    target = write_tiny_qwen35(workdir / "hybrid-mtp.gguf", seed=1, mtp=True)
    draft = write_tiny_qwen35(workdir / "hybrid-draft.gguf", seed=1, perturb=0.01, mtp=False)
    engine = ChatEngine.load(target, draft, n_ctx=512, n_threads=1)
    try:
        plain, _, _ = _generate(engine, "plain", HYBRID_TOKENS)
        rollback = engine.target.rollback.value
        tokens, alpha, drafted = _generate(engine, "draft", HYBRID_TOKENS)
        detail = f"{rollback} rollback, acceptance {alpha:.0%}, {clock.lap()}"
        results = [
            _matches_plain("hybrid target drafts and rolls back", tokens, plain, detail, drafted)
        ]
        if "mtp" not in engine.decoder.drafters.names():
            results.append(CheckResult("MTP head drafts", False, "no MTP head was loaded"))
            return results
        tokens, alpha, drafted = _generate(engine, "mtp", HYBRID_TOKENS)
        detail = f"{drafted} tokens drafted, acceptance {alpha:.0%}, {clock.lap()}"
        results.append(_matches_plain("MTP head drafts", tokens, plain, detail, drafted))
        return results
    finally:
        engine.close()


def _check_qt() -> str:
    # A self-test must run headless (CI, ssh, a bundle smoke test); a user who wants to
    # test their display sets QT_QPA_PLATFORM themselves.
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import __version__ as pyside_version
    from PySide6.QtGui import QIcon, QPixmap
    from PySide6.QtWidgets import QApplication, QLabel

    from specchat import paths

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    icon = QIcon(str(paths.resource("icons", "specchat.svg")))
    # Rendering the SVG goes through the iconengines/imageformats plugins a bundle must carry.
    svg_pixmap = icon.pixmap(64, 64)
    if svg_pixmap.isNull():
        raise RuntimeError("the SVG icon did not render (Qt's svg plugin is missing?)")
    png = QPixmap(str(paths.resource("icons", "specchat-48.png")))
    if png.isNull() or png.width() != 48:
        raise RuntimeError("the 48 px PNG icon did not load (Qt's png support is missing?)")
    label = QLabel("SpecChat")
    label.setWindowIcon(icon)
    label.setStyleSheet(paths.resource("style", "light.qss").read_text(encoding="utf-8"))
    label.show()
    app.processEvents()
    label.close()
    label.deleteLater()
    app.processEvents()
    return f"PySide6 {pyside_version}, platform {app.platformName()}, icon rendered"


class _Clock:
    """Lap times for the report, so a slow part of an install shows itself."""

    def __init__(self) -> None:
        self._last = time.perf_counter()

    def lap(self) -> str:
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        return f"{elapsed * 1000:.0f} ms"


def _run(name: str, check: Callable[[], str]) -> CheckResult:
    clock = _Clock()
    try:
        detail = check()
        return CheckResult(name, True, f"{detail}, {clock.lap()}")
    # A self-test reports every failure and goes on, so one broken part names itself.
    except Exception as error:
        return CheckResult(name, False, f"{type(error).__name__}: {error}")


def run_self_test(*, out: TextIO | None = None) -> int:
    """Run every check, print a short report, return 0 when all passed and 1 otherwise."""
    import llama_cpp

    from specchat import __version__

    out = out or sys.stdout
    started = time.perf_counter()
    frozen = " (frozen bundle)" if getattr(sys, "frozen", False) else ""
    print(f"{HEADER}: SpecChat {__version__}{frozen}, Python {sys.version.split()[0]}", file=out)
    print(f"  llama-cpp-python {llama_cpp.__version__}", file=out)
    results = [_run("resources", _check_resources), _run("model catalog", _check_catalog)]
    # Before the engine: a bundle without its CPU kernels names them, not a failed load.
    results.append(_run("llama.cpp backend", _check_backends))
    with tempfile.TemporaryDirectory(prefix="specchat-selftest-") as workdir:
        try:
            results += _engine_checks(Path(workdir))
        except Exception as error:
            results.append(CheckResult("engine", False, f"{type(error).__name__}: {error}"))
        try:
            results += _hybrid_checks(Path(workdir))
        except Exception as error:
            results.append(CheckResult("hybrid", False, f"{type(error).__name__}: {error}"))
    for family, template in chat_formats.FAMILIES:  # no model needed: template and reader
        results.append(_run(f"{family} chat format", partial(chat_formats.round_trip, template)))
    results.append(_run("Qt", _check_qt))
    for result in results:
        print(f"  {'ok  ' if result.ok else 'FAIL'} {result.name}: {result.detail}", file=out)
    failed = sum(not result.ok for result in results)
    elapsed = time.perf_counter() - started
    if failed:
        print(f"{FAILED}: {failed} of {len(results)} checks failed ({elapsed:.1f} s)", file=out)
        return 1
    print(f"{PASSED}: {len(results)} checks in {elapsed:.1f} s", file=out)
    return 0
