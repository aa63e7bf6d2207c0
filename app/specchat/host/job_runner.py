"""One API request answered on the engine's thread: the prompt checked against the context,
the rounds streamed to the job, and the summary its response reports."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from specchat.engine.baseline import PlainRounds
from specchat.engine.context import ContextOverflowError, OverflowPolicy
from specchat.engine.decoding.kept_sources import KeptSources
from specchat.engine.drafting.prediction.prediction_drafter import PredictionDrafter
from specchat.engine.templates.chat_template import ToolCall
from specchat.engine.templates.guards import ChatTemplateError
from specchat.engine.templates.prompt_tokens import MessageTextError
from specchat.engine.types import GenerationRequest, RoundResult, StopReason, TokenKind
from specchat.host.answer_prompt import answer_prompt
from specchat.host.chat_call import conversation_key
from specchat.host.errors import ApiError, client_gone, engine_failed, invalid
from specchat.host.jobs import Failed, Finished, Job, JobEvent, Round, Started, Summary
from specchat.host.tool_copies import file_tool_results
from specchat.host.tool_prompt import tool_prompt

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine
    from specchat.host.keeper import ChatKeeper

log = logging.getLogger(__name__)


class JobRunner:
    """Answers jobs, one at a time, on whichever thread owns the engine (the engine host's,
    host/engine_host.py, which pauses and resumes the cost table's measurement around them).

    Attributes:
        prefixes: recent prompts' caches kept in memory, or None.
        on_job: called as a job starts (with None) and as it ends (with its last event).
        on_round: called with each round of a job's answer and its tokens' thinking tags
            (TokenRead.tag; () where the answer is not read).
        keeper: writes each answered chat to the conversation store, or None (the setting
            "api.remember_chats" is off: API chats live in memory only).
    """

    def __init__(self, *, prefixes: PrefixCache | None = None) -> None:
        self.prefixes = prefixes
        self.on_job: Callable[[Job, object], None] | None = None
        self.on_round: Callable[[Job, RoundResult, tuple[str, ...]], None] | None = None
        self.keeper: ChatKeeper | None = None
        # The last conversation answered and its text: filed in the suffix index as an
        # earlier chat when another one starts (memory only, see _file_previous).
        self._said: tuple[str, tuple[int, ...]] | None = None

    def run(self, engine: ChatEngine, job: Job, begin: Callable[[], PlainRounds]) -> None:
        """Answer `job` with `engine`; every outcome reaches the job as an event. `begin`
        is called as the answer's first pass is about to run (the host stops measuring) and
        returns what times its plain rounds."""
        self._answer(engine, job, begin)

    def forget_last_chat(self) -> None:
        """The last conversation answered is not filed in the suffix index when another
        starts (the bench does this so that no request copies an earlier one's answer)."""
        self._said = None

    def _file_previous(self, engine: ChatEngine, key: str) -> None:
        """Another conversation starts: the last one's text joins the suffix index as an
        earlier chat, so its answers can still be copied (held in memory only)."""
        said = self._said
        if said is None or said[0] == key:
            return
        engine.said.chat(("api", said[0]), said[1], order=time.time())

    def _answer(self, engine: ChatEngine, job: Job, begin: Callable[[], PlainRounds]) -> None:
        if job.cancel.is_set():
            job.deliver(Failed(client_gone()))
            return
        if self.on_job is not None:
            self.on_job(job, None)
        last: object = None
        try:
            for event in self._events(engine, job, begin):
                # A whole answer's client reads only its end: handing it each round would
                # wake the server's event loop every round, a thread taking CPU from the
                # decode for nothing.
                if isinstance(event, Round) and not job.call.stream:
                    continue
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
            if self.on_job is not None:
                self.on_job(job, last)

    def _events(
        self, engine: ChatEngine, job: Job, begin: Callable[[], PlainRounds]
    ) -> Iterator[JobEvent]:
        call = job.call
        n_ctx = engine.target.n_ctx
        tooling = tool_prompt(engine, call)
        if tooling.answer_format is not None:
            # The format's markers are read from the answer's text: it must spell them.
            engine.target.spell_tokens(tooling.answer_format.markers())
        try:
            # Nothing is dropped to fit: an API client sends the chat it means.
            prepared = answer_prompt(
                engine,
                call.messages,
                max_tokens=1,
                policy=OverflowPolicy.REFUSE,
                template_kwargs=call.template_kwargs,
                tools=tooling.tools,
                answer_prefix=tooling.answer_prefix,
                answer_format=tooling.answer_format,
            )
        except ContextOverflowError as error:
            raise invalid(
                f"the messages need {error.needed:,} tokens but the context holds {n_ctx:,} "
                f"(at most {error.budget:,} for the prompt, so the answer has room)",
                param="messages",
                code="context_length_exceeded",
            ) from None
        except ChatTemplateError as error:
            raise invalid(f"the model's chat template refused the messages: {error}") from None
        except MessageTextError as error:
            raise invalid(str(error), param="messages") from None
        prompt = prepared.tokens
        if prepared.thinking is not None:
            tooling = replace(tooling, thinking_prompt=prepared.thinking.prompt_part)
        room = n_ctx - len(prompt)
        max_tokens = min(call.max_tokens or room, room)
        prediction: tuple[int, ...] = ()
        if call.prediction:
            # As text, never as control tokens: a prediction cannot end a turn.
            prediction = tuple(
                engine.target.tokenize(call.prediction, add_special=False, parse_special=False)
            )
        key = conversation_key(call.messages)
        self._file_previous(engine, key)
        file_tool_results(engine, key, call.messages)
        stops = call.stop
        if tooling.tools is not None and tooling.answer_format is not None:
            stops = (*stops, *tooling.answer_format.stops)  # the model hands over to the tool
        request = GenerationRequest(
            prompt, max_tokens, call.controls, stops, conversation=key, prediction=prediction
        )
        if self.prefixes is not None:
            # The target's cache holds the prompt but its last token (see the decoder).
            for model in (engine.target, engine.draft):
                if model is not None:
                    self.prefixes.prepare(model, prompt[:-1], conversation=key)
        yield Started(len(prompt), max_tokens, tooling)
        kept = KeptSources()
        accepted = rejected = 0
        text: list[str] = []
        result: RoundResult | None = None
        plain = begin()
        reader = tooling.reader()
        if reader is not None:
            reader.feed(tooling.answer_prefix)
        reasoning_tokens = call_tokens = call_kept = 0
        # Ended by the client going away, or once a single call was read (checked between
        # rounds, as the decoder checks it).
        ending = threading.Event()
        for result in engine.generate(request, cancel=ending):
            plain.observe(result)
            kept.add(result)
            if result.choice.mode == PredictionDrafter.name:
                accepted += result.accepted
                rejected += result.drafted - result.accepted
            text.append(result.text)
            tags: list[str] = []
            if reader is not None:
                for token in result.events:
                    read = reader.read_token(token.text)
                    tags.append(read.tag)
                    reasoning_tokens += read.thinking
                    if read.in_call:
                        call_tokens += 1
                        call_kept += token.kind is TokenKind.ACCEPTED
            if job.cancel.is_set() or (reader is not None and reader.ended):
                ending.set()
            if self.on_round is not None:
                self.on_round(job, result, tuple(tags))
            yield Round(result)
        if result is None:  # pragma: no cover - the decoder always yields a last round
            raise RuntimeError("the answer ended without a round")
        self._said = (key, tuple(engine.target.tokens))
        answer = tooling.answer_prefix + "".join(text)
        reply = None
        stop = result.stop or StopReason.EOS
        if reader is not None:
            reader.finish()
            reply = reader.reply()
            if reader.ended and not job.cancel.is_set():
                stop = StopReason.EOS  # its one call is the whole answer
        if self.keeper is not None:
            if reply is None:
                self.keeper.keep(call.messages, answer)
            else:
                calls = [ToolCall(c.id, c.name, c.arguments) for c in reply.calls]
                self.keeper.keep(call.messages, reply.content or "", calls)
        yield Finished(
            Summary(
                stop=stop,
                stats=result.stats,
                prompt_tokens=len(prompt),
                text=answer,
                kept=kept.counts(),
                prediction_accepted=accepted,
                prediction_rejected=rejected,
                baseline=plain.meter.current(),
                mode=call.controls.mode,
                reply=reply,
                tools=tooling.tools is not None,
                reasoning_tokens=reasoning_tokens,
                call_tokens=call_tokens,
                call_kept=call_kept,
                near_ties=engine.target.info.near_ties,
                end_token=result.stop is StopReason.EOS,
            )
        )
        if self.prefixes is not None:
            # Once the answer went out: a restarted server finds the chat where it ended.
            models = [m for m in (engine.target, engine.draft) if m is not None]
            self.prefixes.keep_on_disk(models, key)
