"""GenerationWorker: owns the ChatEngine on a QThread and streams rounds to the window."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal, Slot

from specchat import paths
from specchat.engine.baseline import calibrate
from specchat.engine.types import Controls, RoundResult, Stats, StopReason
from specchat.host.answer_format.formats import format_of
from specchat.host.answer_format.reader import AnswerReader
from specchat.host.answer_prompt import answer_prompt
from specchat.host.engine_host import EngineHost
from specchat.store.changes import ChangeKind, StoreChange
from specchat.workers.generation_payloads import (
    Failure,
    GenerateRequest,
    GenerationFinished,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
    PlainBaseline,
    PromptPrepared,
    PromptProgress,
    RoundUpdate,
    describe_error,
)
from specchat.workers.host_adapter import HostDriver

if TYPE_CHECKING:
    # The engine proper (and llama_cpp under it) is imported when a model is first loaded,
    # so the window opens without it: importing the UI never imports llama_cpp.
    from specchat.engine.baseline import PlainRounds
    from specchat.engine.decoding.decoder import Generation
    from specchat.engine.history import StoredHistory
    from specchat.engine.llamacpp.kv_store import KVStore
    from specchat.engine.llamacpp.prompt_reading import PromptRate, PromptReading
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget
    from specchat.engine.session import ChatEngine
    from specchat.models.catalog import ModelPair
    from specchat.store.conversations import ConversationStore

__all__ = [
    "Failure",
    "GenerateRequest",
    "GenerationFinished",
    "GenerationWorker",
    "LoadProgressUpdate",
    "LoadRequest",
    "Loaded",
    "PlainBaseline",
    "PromptPrepared",
    "PromptProgress",
    "RoundUpdate",
    "describe_error",
]

log = logging.getLogger(__name__)

#: Where conversations' KV state is kept, under the cache directory.
KV_DIR = "kv-state"


# --- the worker --------------------------------------------------------------------------------


class GenerationWorker(QObject):
    """Loads a pair and generates answers, one round per event-loop turn of its thread.

    Each round runs in its own queued `_on_step` call, so stop, control changes and new
    requests sent through queued signals are seen between rounds, never mid-round. The
    engine host (`host`) is stepped on the same thread: API jobs and the cost table's
    measurement take their turns between the window's answers.

    Attributes:
        engine: the loaded ChatEngine, or None.
        host: the engine's host: the API's queue, the measurement, the plain rate.

    Signals:
        load_progress(LoadProgressUpdate): a load advanced.
        loaded(Loaded): a pair is ready.
        prepared(PromptPrepared): an answer's prompt was rendered (maybe with turns dropped).
        prompt_progress(PromptProgress): a long prompt is being read.
        round_ready(RoundUpdate): one round of an answer.
        finished(GenerationFinished): an answer ended, by any stop reason.
        failed(Failure): a load or an answer failed; the message is for people.
        closed(): the engine is released; the thread may quit.
    """

    load_progress = Signal(LoadProgressUpdate)
    loaded = Signal(Loaded)
    prepared = Signal(PromptPrepared)
    prompt_progress = Signal(PromptProgress)
    round_ready = Signal(RoundUpdate)
    finished = Signal(GenerationFinished)
    failed = Signal(Failure)
    closed = Signal()
    #: Internal: schedules the next round behind whatever the event queue already holds.
    _step = Signal()
    #: Internal: one chunk of the draft model's catch-up with a kept conversation, likewise.
    _catch_up = Signal()

    def __init__(
        self,
        *,
        n_threads: int | None = None,
        store: ConversationStore | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.engine: ChatEngine | None = None
        self._n_threads = n_threads
        # Earlier conversations, fed to the engine's suffix drafting while a pair is loaded.
        self._store = store
        if store is not None:
            store.subscribe(self._on_store_change)
        self._history: StoredHistory | None = None
        self.host = EngineHost()
        # A child: it moves to this worker's thread with it, and steps the host there.
        self._host_driver = HostDriver(self.host, parent=self)
        self._plain: PlainRounds | None = None  # times the answer in progress
        self._request: GenerateRequest | None = None
        self._rounds: Iterator[RoundResult | PromptReading] | None = None
        # Conversations' KV state on disk, and the prompt rate estimates are made from.
        self._kv: KVStore | None = None
        self._prompt_rate: PromptRate | None = None
        # The conversation (and its tokens) the draft model reads between answers, to keep
        # its state too: after a restart a drafting follow-up then re-reads nothing.
        self._draft_lag: tuple[str, list[int]] | None = None
        self._generation: Generation | None = None  # the answer in progress, steered
        self._text: list[str] = []
        self._reader: AnswerReader | None = None  # reads the answer in progress's thinking
        # Both events are set directly from the UI thread too, so a stop or a cancelled
        # load is noticed at the next round (or progress callback) without waiting for the
        # queued signal behind it.
        self._cancel = threading.Event()
        self._load_cancel = threading.Event()
        # Loads are numbered in the order they are queued (and so started); a Cancel made
        # while a load still waits in the queue is kept by number, not only in the event,
        # so starting that load cannot wipe it.
        self._load_lock = threading.Lock()
        self._queued_loads = 0
        self._started_loads = 0
        self._cancelled_loads = 0
        self._step.connect(self._on_step, Qt.ConnectionType.QueuedConnection)
        self._catch_up.connect(self._on_catch_up, Qt.ConnectionType.QueuedConnection)

    # --- thread-safe entry points ---------------------------------------------------------
    def cancel_generation(self) -> None:
        """Stop the answer in progress at its next round (callable from any thread)."""
        self._cancel.set()

    def note_load_request(self) -> None:
        """One more load is being queued (callable from any thread, just before it is sent)."""
        with self._load_lock:
            self._queued_loads += 1

    def cancel_load(self) -> None:
        """Abort the load in progress and every load queued so far (callable from any thread)."""
        with self._load_lock:
            self._cancelled_loads = self._queued_loads
            self._load_cancel.set()

    @property
    def busy(self) -> bool:
        return self._rounds is not None

    # --- slots ---------------------------------------------------------------------------
    @Slot(LoadRequest)
    def _on_load_requested(self, request: LoadRequest) -> None:
        """Load the new pair beside the one in use, and only then release the old one: a pair
        that fails to load never costs the user the pair that works (briefly both are held)."""
        from specchat.engine.llamacpp.model import LoadCancelled
        from specchat.engine.session import ChatEngine, LoadProgress

        self._end_generation(StopReason.CANCELLED)
        with self._load_lock:
            self._started_loads += 1
            self._load_cancel.clear()
            if self._started_loads <= self._cancelled_loads:
                self._load_cancel.set()
        cancel = self._load_cancel
        last = [-1.0]

        def progress(update: LoadProgress) -> None:
            # llama.cpp reports hundreds of fractions; a percent step is plenty for a bar.
            if update.overall - last[0] >= 0.01 or update.overall >= 1.0:
                last[0] = update.overall
                self.load_progress.emit(
                    LoadProgressUpdate(request.load_id, update.stage, update.overall * 0.95)
                )

        engine: ChatEngine | None = None
        if self.engine is not None and _shares_servers(self.engine, request.rpc_servers):
            # An rpc-server serves one client at a time: the pair holding it lets go first.
            self._release_engine()
        try:
            target, draft = self._resolve(request)
            if cancel.is_set():
                raise LoadCancelled("loading was cancelled")
            engine = ChatEngine.load(
                target,
                draft,
                n_ctx=request.n_ctx,
                kv_cache=request.kv_cache,
                target_gpu_layers=request.target_gpu_layers,
                draft_gpu_layers=request.draft_gpu_layers,
                n_threads=self._n_threads,
                progress=progress,
                cancel=cancel,
                remote=_remote_target(request.rpc_servers),
            )
            calibrated = None
            if request.calibrate:
                self.load_progress.emit(LoadProgressUpdate(request.load_id, "calibrating", 0.96))
                calibrated = calibrate(engine, cancel=self._load_cancel)
        except Exception as error:
            if engine is not None:
                engine.close()
            if not isinstance(error, LoadCancelled):
                log.warning("load failed", exc_info=True)
            self.failed.emit(
                Failure(
                    describe_error(error),
                    load_id=request.load_id,
                    cancelled=isinstance(error, LoadCancelled),
                    kept=self.engine is not None,
                )
            )
            return
        self._release_engine()
        self.engine = engine
        self.host.attach(engine, calibrated=calibrated)
        from specchat.engine.history import attach_history

        self._history = attach_history(self._store, engine)
        self.load_progress.emit(LoadProgressUpdate(request.load_id, "ready", 1.0))
        self.loaded.emit(
            Loaded(request.load_id, self.engine.info, request.label, self.host.baseline.current())
        )
        self.host.wake()  # measuring the cost table, between answers

    @Slot(GenerateRequest)
    def _on_generate_requested(self, request: GenerateRequest) -> None:
        self._end_generation(StopReason.CANCELLED)
        if self.engine is None:
            self.failed.emit(
                Failure(
                    "No model is loaded yet. Choose a pair with Models…",
                    request_id=request.request_id,
                )
            )
            return
        self._cancel.clear()
        try:
            prepared = answer_prompt(
                self.engine,
                request.messages,
                max_tokens=request.max_tokens,
                policy=request.policy,
                template_kwargs=request.template_variables(),
            )
            # The answer is read as the API reads it, from the prompt's open thinking on.
            opened = prepared.thinking
            self._reader = AnswerReader(
                format_of(self.engine.template.source),
                thinking_prompt="" if opened is None else opened.prompt_part,
            )
            self.prepared.emit(
                PromptPrepared(request.request_id, prepared.plan.dropped, len(prepared.tokens))
            )
            # Made now (it runs nothing yet) so controls moved while the prompt is read apply
            # from the answer's first round.
            self._generation = self.engine.generate(
                request.for_engine(prepared.tokens), cancel=self._cancel
            )
            self._rounds = self._answer_steps(self.engine, request, self._generation)
        except Exception as error:
            log.warning("generation could not start", exc_info=True)
            self.failed.emit(Failure(describe_error(error), request_id=request.request_id))
            return
        self._request = request
        self._text = []
        self._plain = self.host.begin_answer()
        self._step.emit()

    @Slot()
    def _on_step(self) -> None:
        rounds, request = self._rounds, self._request
        if rounds is None or request is None:
            return  # the answer ended (stopped, replaced) after this step was queued
        try:
            result = next(rounds)
        except StopIteration:
            self._finish(StopReason.EOS, None)
            return
        except Exception as error:
            log.warning("generation failed", exc_info=True)
            self._rounds = self._request = self._generation = self._plain = None
            self.host.end_answer()
            self.failed.emit(Failure(describe_error(error), request_id=request.request_id))
            return
        if not isinstance(result, RoundResult):
            # A chunk of the prompt was read: say how far, then queue the next step (a Stop
            # queued meanwhile is seen first).
            self.prompt_progress.emit(PromptProgress(request.request_id, result))
            self._step.emit()
            return
        if self._plain is not None:
            self._plain.observe(result)
        self._text.append(result.text)
        baseline = self.host.baseline.current()
        reader = self._reader
        tags = () if reader is None else tuple(reader.read_token(e.text).tag for e in result.events)
        self.round_ready.emit(RoundUpdate(request.request_id, result, baseline, tags))
        if result.stop is not None:
            self._finish(result.stop, result.stats)
        else:
            self._step.emit()

    @Slot()
    def _on_catch_up(self) -> None:
        # A chunk per turn, between answers (as the measurement): a plain or auto answer
        # leaves the draft model behind, and a state it never read could not be kept.
        engine, lag, kv = self.engine, self._draft_lag, self._kv
        if engine is None or engine.draft is None or not lag or not kv or self._rounds:
            return
        from specchat.workers.kept_state import catch_up

        if catch_up(kv, engine.draft, *lag):
            self._catch_up.emit()
        else:
            self._draft_lag = None

    @Slot(object)
    def _on_stop_requested(self, request_id: int | None = None) -> None:
        if self._request is not None and request_id in (None, self._request.request_id):
            self._cancel.set()
            self._end_generation(StopReason.CANCELLED)

    @Slot(Controls)
    def _on_controls_changed(self, update: Controls) -> None:
        if self._generation is not None:
            self._generation.steer(update)

    @Slot()
    def _on_shutdown_requested(self) -> None:
        # Closing waits a bounded time: no state written now (each finished answer's is kept).
        self._kv = None
        if self._store is not None:
            self._store.unsubscribe(self._on_store_change)
        self._end_generation(StopReason.CANCELLED)
        self._release_engine()
        self.closed.emit()

    # --- helpers -----------------------------------------------------------------------
    def _resolve(self, request: LoadRequest) -> tuple[Path, Path | None]:
        from specchat.engine.llamacpp.model import ModelLoadError

        if request.target is not None:
            return request.target, request.draft
        if not request.pair_id:
            raise ModelLoadError("no model pair chosen")
        self.load_progress.emit(LoadProgressUpdate(request.load_id, "resolving", 0.0))
        from specchat.models.catalog import CatalogError
        from specchat.models.target_files import pair_files

        try:
            return pair_files(request.pair_id, variant=request.target_variant)
        except CatalogError as error:
            raise ModelLoadError(str(error)) from None

    @staticmethod
    def _variant(pair: ModelPair, name: str) -> Path | None:
        """The pair's target file of variant `name` if it is on disk, else None."""
        from specchat.models.target_files import variant_file

        return variant_file(pair, name)

    def _answer_steps(
        self, engine: ChatEngine, request: GenerateRequest, generation: Generation
    ) -> Iterator[RoundResult | PromptReading]:
        """The prompt read in chunks (after restoring the conversation's kept state), then
        the answer's rounds."""
        from specchat.engine.llamacpp.kv_store import KVStore
        from specchat.engine.llamacpp.prompt_reading import PromptRate, read_prompt
        from specchat.workers.kept_state import restore_state

        prompt = generation.request.prompt_tokens
        if self._kv is None:
            self._kv = KVStore(paths.cache_dir() / KV_DIR)
            self._prompt_rate = PromptRate()
        assert self._prompt_rate is not None
        restored = 0
        if request.conversation_id is not None:
            conversation = str(request.conversation_id)
            restored = restore_state(self._kv, engine, conversation, list(prompt[:-1]))
        yield from read_prompt(
            engine.target, prompt[:-1], rate=self._prompt_rate, restored=restored
        )
        yield from generation

    def _on_store_change(self, change: StoreChange) -> None:
        # Called on the thread that changed the store: only files are touched here.
        if change.kind == ChangeKind.DELETED:
            from specchat.engine.llamacpp.kv_store import forget_conversation

            try:
                forget_conversation(paths.cache_dir() / KV_DIR, str(change.conversation_id))
            except OSError:
                log.info("a deleted conversation's KV state could not be erased", exc_info=True)

    def _keep_state(self, request: GenerateRequest) -> None:
        """Write the conversation's KV state to disk, for its next answer after a restart;
        a draft model that did not read it all reads the rest between answers first."""
        from specchat.workers.kept_state import keep_state

        self._draft_lag = None
        if request.conversation_id is None or self._kv is None or self.engine is None:
            return
        conversation = str(request.conversation_id)
        lag = keep_state(self._kv, self.engine, conversation)
        if lag is not None:
            self._draft_lag = (conversation, lag)
            self._catch_up.emit()

    def _finish(self, stop: StopReason, stats: Stats | None) -> None:
        request = self._request
        assert request is not None
        self._rounds = self._request = self._generation = self._plain = None
        self._keep_state(request)
        # What the answer's rounds taught is stored; API jobs and the measurement go on.
        self.host.end_answer()
        self.finished.emit(
            GenerationFinished(
                request.request_id,
                stop,
                stats or Stats(),
                "".join(self._text),
                self.host.baseline.current(),
            )
        )

    def _end_generation(self, reason: StopReason) -> None:
        """End the answer in progress (if any) without another round, reporting `reason`."""
        if self._rounds is None or self._request is None:
            return
        rounds = self._rounds
        try:
            rounds.close()  # type: ignore[attr-defined]
        except Exception:
            log.debug("closing the round generator failed", exc_info=True)
        self._finish(reason, None)

    def _release_engine(self) -> None:
        self._draft_lag = None
        self._kv = self._prompt_rate = None  # the next pair reads prompts at its own rate
        if self._history is not None:
            self._history.close()
            self._history = None
        if self.engine is not None:
            engine, self.engine = self.engine, None
            self.host.attach(None)
            engine.close()


def _remote_target(servers: str) -> RemoteTarget | None:
    from specchat.engine.llamacpp.rpc_placement import remote_target

    return remote_target(servers)


def _shares_servers(engine: ChatEngine, servers: str) -> bool:
    """Whether a load over `servers` needs a server `engine`'s target holds."""
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget
    from specchat.engine.llamacpp.rpc_wire import parse_endpoints

    held = RemoteTarget.servers_in(engine.info.target.remote)
    try:
        return bool(set(held) & set(parse_endpoints(servers)))
    except ValueError:
        return False
