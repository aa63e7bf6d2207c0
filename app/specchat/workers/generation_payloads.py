"""Requests to the generation worker, the payloads of its signals, and failure messages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.baseline import PlainBaseline
from specchat.engine.context import OverflowPolicy
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import (
    KV_CACHES,
    Controls,
    GenerationRequest,
    RoundResult,
    Stats,
    StopReason,
)

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prompt_reading import PromptReading
    from specchat.engine.session import EngineInfo


# --- requests (UI → worker) ----------------------------------------------------------------


@dataclass(frozen=True)
class LoadRequest:
    """Which pair to load and how.

    Attributes:
        load_id: chosen by the sender; echoed in progress, loaded and failure payloads.
        target: the target GGUF, or None to resolve `pair_id` from the catalog.
        draft: the draft GGUF, or None (lookup-only speculation).
        pair_id: catalog id used when `target` is None.
        label: what the window calls this pair.
        n_ctx: context window.
        kv_cache: how a CPU context stores keys (engine.types.KV_CACHES).
        target_gpu_layers, draft_gpu_layers: layers to offload (-1 = all).
        calibrate: measure the plain rate right after loading.
        target_variant: which of the pair's target files runs ("target", "cpu" or
            "optimised"; see models/target_files.py); the shipped one when it is not on disk.
        rpc_servers: other machines the target's layers spread over ("HOST:PORT,…"); ""
            for this machine alone.
    """

    load_id: int
    target: Path | None = None
    draft: Path | None = None
    pair_id: str | None = None
    label: str = ""
    n_ctx: int = 4096
    kv_cache: str = KV_CACHES[0]
    target_gpu_layers: int = -1
    draft_gpu_layers: int = -1
    calibrate: bool = True
    target_variant: str = "target"
    rpc_servers: str = ""


@dataclass(frozen=True)
class GenerateRequest:
    """One answer to produce.

    Attributes:
        request_id: chosen by the sender; every payload of this answer carries it.
        messages: the conversation, ending with the user's message.
        max_tokens: longest answer.
        controls: mode, K and sampling at the start (later changes come as Controls too).
        policy: what to do when the conversation outgrows the context.
        conversation_id: the stored conversation, whose KV state is kept on disk between
            answers (and restarts); None keeps nothing.
        thinking: the template's thinking switch (`enable_thinking`); None leaves it to the
            template.
    """

    request_id: int
    messages: tuple[ChatMessage, ...]
    max_tokens: int = 1024
    controls: Controls = Controls()
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST
    conversation_id: int | None = None
    thinking: bool | None = None

    def template_variables(self) -> dict[str, bool] | None:
        """What the template is given beside the chat, or None."""
        return None if self.thinking is None else {"enable_thinking": self.thinking}

    def for_engine(self, prompt_tokens: tuple[int, ...]) -> GenerationRequest:
        """The engine's request for this answer, once the conversation is `prompt_tokens`."""
        return GenerationRequest(
            prompt_tokens, self.max_tokens, self.controls, conversation=self.conversation_id
        )


# --- payloads (worker → UI) ----------------------------------------------------------------


@dataclass(frozen=True)
class PromptProgress:
    """Reading a long prompt, before the answer's first token.

    Attributes:
        request_id: the GenerateRequest's id.
        reading: tokens read of those to read, restored from disk, and the time left.
    """

    request_id: int
    reading: PromptReading


@dataclass(frozen=True)
class LoadProgressUpdate:
    """How far a load has come.

    Attributes:
        load_id: the LoadRequest's id.
        stage: 'resolving', 'checking', 'target', 'draft' or 'calibrating'.
        overall: 0..1 across the whole load.
    """

    load_id: int
    stage: str
    overall: float


@dataclass(frozen=True)
class Loaded:
    """A pair is loaded and ready.

    Attributes:
        load_id: the LoadRequest's id.
        info: what the engine loaded (backend, GPU layers, vocabulary check).
        label: the request's label.
        baseline: the plain rate measured after loading, or None.
    """

    load_id: int
    info: EngineInfo
    label: str
    baseline: PlainBaseline | None


@dataclass(frozen=True)
class PromptPrepared:
    """The prompt was rendered; old turns may have been dropped to fit the context.

    Attributes:
        request_id: the GenerateRequest's id.
        dropped: indices of the request's messages left out of the prompt.
        prompt_tokens: prompt length in tokens.
    """

    request_id: int
    dropped: tuple[int, ...]
    prompt_tokens: int


@dataclass(frozen=True)
class RoundUpdate:
    """One round of an answer.

    Attributes:
        request_id: the GenerateRequest's id (the UI ignores ids it cancelled).
        result: the engine's round.
        baseline: the current plain baseline, or None while nothing is measured.
        thinking: each event's thinking tag as the answer's reader read it (store's
            THINKING, THINKING_MARKUP, or "" for reply); () when nothing was read.
    """

    request_id: int
    result: RoundResult
    baseline: PlainBaseline | None
    thinking: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationFinished:
    """An answer ended (also when stopped).

    Attributes:
        request_id: the GenerateRequest's id.
        stop: why it ended.
        stats: the answer's totals.
        text: the whole answer.
        baseline: the plain baseline at the end, or None.
    """

    request_id: int
    stop: StopReason
    stats: Stats
    text: str
    baseline: PlainBaseline | None


@dataclass(frozen=True)
class Failure:
    """Something went wrong; `message` is meant for people, never a traceback.

    Attributes:
        message: what happened and, where known, what to do.
        request_id: the answer that failed, or None.
        load_id: the load that failed, or None.
        cancelled: the user cancelled (a load), rather than an error.
        kept: a load failed and the pair loaded before it is still in use.
    """

    message: str
    request_id: int | None = None
    load_id: int | None = None
    cancelled: bool = False
    kept: bool = False


def describe_error(error: BaseException) -> str:
    """A one-paragraph message for people; never a traceback."""
    from specchat.engine.context import ContextOverflowError
    from specchat.engine.llamacpp.model import (
        ContextFullError,
        DecodeError,
        LoadCancelled,
        ModelLoadError,
    )
    from specchat.engine.llamacpp.rpc_wire import RpcServerError
    from specchat.engine.session import IncompatibleDraftError
    from specchat.engine.templates.guards import ChatTemplateError

    if isinstance(error, IncompatibleDraftError):
        return f"Incompatible draft model: {error}"
    if isinstance(error, LoadCancelled):
        return "Loading was cancelled."
    if isinstance(error, (ModelLoadError, RpcServerError)):
        return f"The model could not be loaded: {error}"
    if isinstance(error, ContextOverflowError):
        return f"The conversation does not fit the context window: {error}"
    if isinstance(error, ContextFullError):
        return f"The context window is full: {error}. Start a new conversation."
    if isinstance(error, ChatTemplateError):
        return f"The model's chat template cannot be used: {error}"
    if isinstance(error, MemoryError):
        return "Out of memory. Try a smaller model pair or fewer GPU layers."
    if isinstance(error, DecodeError):
        return f"The model failed while generating: {error}"
    if isinstance(error, FileNotFoundError):
        return f"A model file is missing: {error}"
    text = str(error) or type(error).__name__
    return f"Unexpected error ({type(error).__name__}): {text}"
