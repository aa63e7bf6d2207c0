"""Typed settings, each declared once, persisted as JSON in the config directory."""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from specchat import paths
from specchat.engine.types import KV_CACHES, MAX_TEMPERATURE

T = TypeVar("T")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One declared setting.

    Attributes:
        key: dotted name used in the JSON file.
        type: the Python type values are coerced to.
        default: value when nothing is stored or the stored value is unusable.
        description: one line shown in help and docs.
        choices: the values allowed, for a setting that takes one of a few words (or a
            function returning them, for a list known only at run time: see `allowed`).
        internal: kept by the window itself (geometry, the pairs Models… chose): the
            Settings dialog leaves it out.
        bounds: the lowest and highest value of a number (None: any finite number); a
            stored value outside them, or not finite (NaN, infinity), reads as the default.
        secret: a password-like text (a key), shown masked where it is edited.
    """

    key: str
    type: type
    default: T
    description: str
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    internal: bool = False
    bounds: tuple[float, float] | None = None
    secret: bool = False

    def accepts(self, value: Any) -> bool:
        """Whether `value` (of the setting's type) is one the setting may hold."""
        if self.type is not float and self.type is not int:
            return True
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return self.bounds is None or self.bounds[0] <= value <= self.bounds[1]

    def allowed(self) -> tuple[str, ...]:
        """The values allowed (empty: any value of the type)."""
        return self.choices() if callable(self.choices) else self.choices


def _mode_names() -> tuple[str, ...]:
    # The drafting modes are whatever drafters are registered (engine/drafting), read when
    # asked: a drafter registered after this module loaded is listed too.
    from specchat.engine.drafting.registry import mode_names

    return mode_names()


REGISTRY: dict[str, Setting[Any]] = {}


def declare(
    key: str,
    type_: type,
    default: T,
    description: str,
    *,
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = (),
    internal: bool = False,
    bounds: tuple[float, float] | None = None,
    secret: bool = False,
) -> Setting[T]:
    if key in REGISTRY:
        raise ValueError(f"setting {key!r} declared twice")
    setting: Setting[T] = Setting(
        key, type_, default, description, choices, internal, bounds, secret
    )
    REGISTRY[key] = setting
    return setting


# --- model and drafting -------------------------------------------------------------------
PAIR_ID = declare(
    "model.pair", str, "default", "Catalog id of the target/draft pair in use", internal=True
)
CUSTOM_TARGET = declare(
    "model.custom_target", str, "", "Path of a local target GGUF", internal=True
)
CUSTOM_DRAFT = declare("model.custom_draft", str, "", "Path of a local draft GGUF", internal=True)
TARGET_FILE = declare(
    "model.target_file",
    str,
    "target",
    "Which target file of the pair runs: target (as shipped), cpu (the catalog's CPU format) "
    "or optimised (the Q4_0 copy made here); the shipped file when that one is not on disk",
    choices=("target", "cpu", "optimised"),
)
CUSTOM_PAIRS: Setting[list[Any]] = declare(
    "model.custom_pairs",
    list,
    [],
    "Local pairs added in Models… ({name, target, draft} each)",
    internal=True,
)
GOOD_PAIRS: Setting[list[Any]] = declare(
    "model.good_pairs",
    list,
    [],
    "Pairs that loaded, latest first: the fallback at start",
    internal=True,
)
MODE = declare(
    "drafting.mode",
    str,
    "auto",
    "auto, plain or a drafter's name",
    choices=lambda: _mode_names(),
)
#: The longest draft a fixed mode runs (the K slider's range; longer rarely pays).
MAX_FIXED_K = 16
K = declare(
    "drafting.k",
    int,
    4,
    "Draft length per round when the mode is not auto",
    bounds=(1, MAX_FIXED_K),
)
TEMPERATURE = declare(
    "sampling.temperature",
    float,
    0.0,
    "Sampling temperature; 0 is greedy",
    bounds=(0.0, MAX_TEMPERATURE),
)
TOP_P = declare("sampling.top_p", float, 1.0, "Nucleus sampling threshold", bounds=(0.05, 1.0))
MAX_TOKENS = declare(
    "sampling.max_tokens", int, 1024, "Longest answer in tokens", bounds=(1, 10**7)
)
N_CTX = declare("model.n_ctx", int, 4096, "Context window in tokens")
KV_CACHE = declare(
    "model.kv_cache",
    str,
    KV_CACHES[0],
    "How the KV cache stores keys on a CPU: q8_0 (a batch's rows equal single ones, so "
    "speculative answers equal plain ones exactly; half the key memory) or f16 (llama.cpp's "
    "default: plain answers equal stock llama.cpp's; a verify pass can part from plain at "
    "a near-tie)",
    choices=KV_CACHES,
)
TARGET_GPU_LAYERS = declare("gpu.target_layers", int, -1, "Target layers offloaded (-1 = all)")
DRAFT_GPU_LAYERS = declare("gpu.draft_layers", int, -1, "Draft layers offloaded (-1 = all)")
RPC_SERVERS = declare(
    "gpu.rpc_servers",
    str,
    "",
    "Other machines' `specchat rpc-server`s the target's layers spread over, as HOST:PORT "
    "separated by commas (the draft stays here); empty: this machine alone",
)
CONTEXT_OVERFLOW = declare(
    "chat.context_overflow",
    str,
    "drop_oldest",
    "What to do when a chat outgrows the context",
    choices=("drop_oldest", "refuse"),
)
# --- the API (`specchat serve`, the window's "Serve API") -----------------------------------
API_HOST = declare(
    "api.host",
    str,
    "127.0.0.1",
    "Address the window's Serve API listens on (any other than this machine's needs a key)",
)
API_PORT = declare(
    "api.port",
    int,
    8080,
    "Port the window's Serve API listens on (0: any free port)",
    bounds=(0, 65535),
)
API_KEY = declare(
    "api.key",
    str,
    "",
    "Key editors must send to the window's Serve API (none: this machine only); kept in "
    "settings.json as written",
    secret=True,
)
REMEMBER_API_CHATS = declare(
    "api.remember_chats",
    bool,
    False,
    "Keep the API's conversations in the conversation list, and their caches on disk for a "
    "restarted server (off: in memory while it serves)",
)
# --- window ---------------------------------------------------------------------------------
COLOUR_TOKENS = declare("view.colour_tokens", bool, True, "Colour tokens by how they were made")
SHOW_REJECTED = declare("view.show_rejected", bool, False, "Show rejected drafts as ghost text")
THINK = declare(
    "chat.think",
    bool,
    True,
    "Let a model whose chat template has a thinking switch think before it answers",
)
WINDOW_GEOMETRY = declare(
    "window.geometry", str, "", "Saved main-window geometry (base64)", internal=True
)
WINDOW_STATE = declare(
    "window.state", str, "", "Saved splitter and panel state (base64)", internal=True
)
ADVANCED_OPEN = declare(
    "window.advanced_open", bool, False, "Advanced sampling fold is open", internal=True
)
CONVERSATIONS_VISIBLE = declare(
    "window.conversations_visible", bool, True, "The conversation list is shown"
)
SIDE_PANEL_VISIBLE = declare("window.side_panel_visible", bool, True, "The side panel is shown")
LAST_CONVERSATION = declare(
    "window.last_conversation", int, 0, "Conversation reopened at start (0 = none)", internal=True
)
THEME = declare(
    "view.theme", str, "system", "system, light or dark", choices=("system", "light", "dark")
)
CALIBRATE_PLAIN = declare(
    "speed.calibrate", bool, True, "Time a few plain tokens after loading, for the speed-up"
)


class Settings:
    """Settings file with typed access; every change is written atomically.

    Attributes:
        path: the JSON file.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.config_dir() / "settings.json"
        self._values: dict[str, Any] = {}
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self._values = loaded
        except (OSError, ValueError):
            # A missing or damaged settings file falls back to defaults, never blocks start-up.
            self._values = {}

    def get(self, setting: Setting[T]) -> T:
        raw = self._values.get(setting.key, setting.default)
        try:
            if setting.type is bool and not isinstance(raw, bool):
                return setting.default
            if setting.type in (list, dict) and not isinstance(raw, setting.type):
                return copy.copy(setting.default)
            value = setting.type(raw)
        except (TypeError, ValueError, OverflowError):
            return setting.default
        return value if setting.accepts(value) else setting.default

    def set(self, setting: Setting[T], value: T) -> None:
        """Store `value`; raises ValueError for one the setting may not hold (NaN, infinity,
        a number outside its bounds)."""
        try:
            value = setting.type(value)
        except OverflowError:  # an int too large for a float
            raise ValueError(f"{setting.key} cannot be {value!r}") from None
        if not setting.accepts(value):
            raise ValueError(f"{setting.key} cannot be {value!r}")
        self._values[setting.key] = value
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".settings.", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(self._values, handle, indent=2, sort_keys=True)
        os.replace(tmp, self.path)
