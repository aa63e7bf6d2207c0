"""The one thread that owns the engine: requests queue for it in order, bounded."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from specchat.engine.baseline import BaselineMeter, calibrate
from specchat.engine.chat_template import ChatMessage
from specchat.engine.context import ContextOverflowError, OverflowPolicy
from specchat.engine.history import suffix_index_of
from specchat.engine.kept_sources import KeptSources
from specchat.engine.suffix_index import Source
from specchat.engine.template_guards import ChatTemplateError
from specchat.engine.types import GenerationRequest, RoundResult, StopReason, TokenKind
from specchat.serve.errors import ApiError, busy, engine_failed, invalid
from specchat.serve.jobs import Failed, Finished, Job, JobEvent, Round, Started, Summary

if TYPE_CHECKING:
    from specchat.engine.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine

log = logging.getLogger(__name__)

#: Requests that may wait behind the one being answered; past it, 503 with Retry-After.
DEFAULT_CAPACITY = 8
#: What a refused client is told to wait, in seconds.
RETRY_AFTER_S = 5
#: The name of the drafter that copies from a request's prediction (engine/drafting).
PREDICTION = "prediction"


def conversation_key(messages: Sequence[ChatMessage]) -> str:
    """The same chat across requests: its opening messages (system prompt, first question)
    name it, so a follow-up is "this chat" to the drafters and another chat is not."""
    digest = hashlib.sha256()
    for message in messages[:2]:
        digest.update(f"{message.role}\0{message.content}\0".encode())
    return "api-" + digest.hexdigest()[:16]


class EngineThread:
    """Runs jobs on one thread that alone calls the engine (llama.cpp).

    Between jobs it measures the machine's cost table a pass at a time (as the window's
    worker does), so `auto` prices passes from this machine.

    Attributes:
        engine: the loaded pair.
        capacity: jobs that may wait.
        baseline: the plain rate speed-ups are measured against.
        prefixes: recent prompts' caches kept in memory, or None.
        on_job: called on the engine thread as a job starts and as it ends (the window's
            view of the queue), with the job and None or its last event.
    """

    def __init__(
        self,
        engine: ChatEngine,
        *,
        capacity: int = DEFAULT_CAPACITY,
        calibrate_plain: bool = True,
        prefixes: PrefixCache | None = None,
        profile: bool = True,
    ) -> None:
        self.engine = engine
        self.capacity = capacity
        self.baseline = BaselineMeter()
        self.prefixes = prefixes
        self.on_job: Callable[[Job, object], None] | None = None
        self._calibrate = calibrate_plain
        self._profile = profile
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=capacity)
        self._stop = threading.Event()
        self._current: Job | None = None
        # The last conversation answered and its text: filed in the suffix index as an
        # earlier chat when another one starts (memory only, see _file_previous).
        self._said: tuple[str, tuple[int, ...]] | None = None
        self._thread = threading.Thread(target=self._run, name="specchat-engine", daemon=True)
        self.ready = threading.Event()

    # --- any thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue `job`; raises ApiError (503) when the queue is full or closing."""
        if self._stop.is_set():
            raise busy(RETRY_AFTER_S)
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            raise busy(RETRY_AFTER_S) from None

    @property
    def waiting(self) -> int:
        return self._jobs.qsize()

    @property
    def running(self) -> bool:
        return self._current is not None

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Cancel the job in progress and every waiting one; True once the thread ended."""
        self._stop.set()
        current = self._current
        if current is not None:
            current.cancel.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.cancel.set()
                job.deliver(Failed(ApiError(503, "the server is stopping", kind="server_error")))
        with contextlib.suppress(queue.Full):
            self._jobs.put_nowait(None)
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # --- the engine thread -------------------------------------------------------------------
    def _run(self) -> None:
        if self._calibrate:
            self.baseline.calibrated = calibrate(self.engine, cancel=self._stop)
        self.ready.set()
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=None if self._idle_done() else 0.0)
            except queue.Empty:
                self._measure()
                continue
            if job is None:
                break
            self._current = job
            try:
                self._answer(job)
            finally:
                self._current = None
        self.engine.profiler.save()

    def _idle_done(self) -> bool:
        return not self._profile or self.engine.profiler.done

    def _measure(self) -> None:
        """One pass of the cost table's measurement, between jobs."""
        try:
            self.engine.profiler.step()
        except Exception:
            log.info("measuring the cost table failed", exc_info=True)
            self._profile = False

    def _file_previous(self, key: str) -> None:
        """Another conversation starts: the last one's text joins the suffix index as an
        earlier chat, so its answers can still be copied (held in memory only)."""
        said = self._said
        if said is None or said[0] == key:
            return
        index = suffix_index_of(self.engine)
        if index is not None:
            index.put(("api", said[0]), said[1], source=Source.HISTORY, order=time.time())

    def _answer(self, job: Job) -> None:
        if job.cancel.is_set():
            job.deliver(Failed(ApiError(499, "the client went away", kind="cancelled")))
            return
        if self.on_job is not None:
            self.on_job(job, None)
        last: object = None
        try:
            for event in self._events(job):
                job.deliver(event)
                last = event
        except ApiError as error:
            last = Failed(error)
            job.deliver(last)
        except Exception as error:
            log.warning("an API request failed", exc_info=True)
            last = Failed(engine_failed(str(error) or type(error).__name__))
            job.deliver(last)
        finally:
            self.engine.profiler.save()
            if self.on_job is not None:
                self.on_job(job, last)

    def _events(self, job: Job) -> Iterator[JobEvent]:
        engine, call = self.engine, job.call
        n_ctx = engine.target.n_ctx
        try:
            # Nothing is dropped to fit: an API client sends the chat it means.
            prepared = engine.prepare(call.messages, max_tokens=1, policy=OverflowPolicy.REFUSE)
        except ContextOverflowError as error:
            raise invalid(
                f"the messages need {error.needed:,} tokens but the context holds {n_ctx:,} "
                f"(at most {error.budget:,} for the prompt, so the answer has room)",
                param="messages",
                code="context_length_exceeded",
            ) from None
        except ChatTemplateError as error:
            raise invalid(f"the model's chat template refused the messages: {error}") from None
        prompt = prepared.tokens
        room = n_ctx - len(prompt)
        max_tokens = min(call.max_tokens or room, room)
        prediction: tuple[int, ...] = ()
        if call.prediction:
            # As text, never as control tokens: a prediction cannot end a turn.
            prediction = tuple(
                engine.target.tokenize(call.prediction, add_special=False, parse_special=False)
            )
        key = conversation_key(call.messages)
        self._file_previous(key)
        request = GenerationRequest(
            prompt, max_tokens, call.controls, call.stop, conversation=key, prediction=prediction
        )
        if self.prefixes is not None:
            # The target's cache holds the prompt but its last token (see the decoder).
            for model in (engine.target, engine.draft):
                if model is not None:
                    self.prefixes.prepare(model, prompt[:-1])
        yield Started(len(prompt), max_tokens)
        kept = KeptSources()
        accepted = rejected = 0
        text: list[str] = []
        previous = 0.0
        result: RoundResult | None = None
        self.engine.profiler.pause()
        for result in engine.generate(request, cancel=job.cancel):
            now = time.perf_counter()
            plain = result.drafted == 0 and any(e.kind == TokenKind.PLAIN for e in result.events)
            # As the window measures it: later plain rounds, from the previous round's end.
            if plain and result.index > 0 and previous:
                self.baseline.observe(now - previous)
            previous = now
            kept.add(result)
            if result.choice.mode == PREDICTION:
                accepted += result.accepted
                rejected += result.drafted - result.accepted
            text.append(result.text)
            yield Round(result)
        if result is None:  # pragma: no cover - the decoder always yields a last round
            raise RuntimeError("the answer ended without a round")
        self._said = (key, tuple(engine.target.tokens))
        yield Finished(
            Summary(
                stop=result.stop or StopReason.EOS,
                stats=result.stats,
                prompt_tokens=len(prompt),
                text="".join(text),
                kept=kept.counts(),
                prediction_accepted=accepted,
                prediction_rejected=rejected,
                baseline=self.baseline.current(),
                mode=call.controls.mode,
            )
        )
