"""ChatEngine: a loaded target/draft pair that turns chat messages into streamed rounds."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specchat.engine.context import ContextPlan, OverflowPolicy, fit_messages
from specchat.engine.costs import profiling
from specchat.engine.costs.key import pair_key
from specchat.engine.costs.priors import MAX_K
from specchat.engine.costs.profiling import PairProfiler, load_costs, load_head_costs
from specchat.engine.costs.store import CostStore
from specchat.engine.decoding.decoder import Generation, SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.head import HeadDrafter, head_architectures, head_files, load_head
from specchat.engine.drafting.stored_estimates import StoredEstimates
from specchat.engine.llamacpp.compute_threads import workers_released
from specchat.engine.llamacpp.hidden_state_head import HiddenStateHead
from specchat.engine.llamacpp.model import LlamaModel, LoadInfo, ModelLoadError
from specchat.engine.llamacpp.rpc_placement import RemoteTarget
from specchat.engine.said import SaidIndex
from specchat.engine.templates.chat_template import ChatMessage, ChatTemplate
from specchat.engine.templates.family import TemplateChoice, choose_template
from specchat.engine.templates.prompt_tokens import PromptTokenizer
from specchat.engine.types import KV_CACHES, GenerationRequest, RoundResult

#: The template variable that turns a model's thinking on or off (Qwen3, Qwen3.5, Gemma 4,
#: and what llama.cpp's server and transformers pass for `enable_thinking`).
THINKING_SWITCH = "enable_thinking"


class IncompatibleDraftError(ModelLoadError):
    """The draft model's vocabulary does not match the target's."""


@dataclass(frozen=True)
class LoadProgress:
    """Progress of loading a pair.

    Attributes:
        stage: 'target', 'draft' or 'checking'.
        fraction: 0..1 within the stage.
        overall: 0..1 across the whole load.
    """

    stage: str
    fraction: float
    overall: float


@dataclass(frozen=True)
class EngineInfo:
    """What is loaded.

    Attributes:
        target: the target's load report.
        draft: the draft's, or None.
        compat_reason: the compatibility verdict's reason ("" without a draft).
        drafting_refused: why the pair cannot draft as loaded (a recurrent model), or "".
        template_note: which chat template is in use and why, for people.
        template_guessed: the target names no chat template: SpecChat chose one.
        drafters: the drafters the pair offers, by name ("lookup", "draft", "mtp"...).
        head_labels: those that draft from the target's hidden state, as people read them
            ("MTP head", "Gemma 4 assistant").
        thinking_switch: the chat template reads `enable_thinking` (Qwen3.5, Gemma 4): a
            request may turn the model's thinking on or off.
    """

    target: LoadInfo
    draft: LoadInfo | None
    compat_reason: str
    drafting_refused: str = ""
    template_note: str = ""
    template_guessed: bool = False
    drafters: tuple[str, ...] = ()
    head_labels: tuple[str, ...] = ()
    thinking_switch: bool = False

    @property
    def kv_bytes_per_token(self) -> int:
        """What a context token costs both models' KV caches."""
        return self.target.kv_bytes_per_token + (self.draft.kv_bytes_per_token if self.draft else 0)

    @property
    def state_bytes(self) -> int:
        """What both models' recurrent state copies take at most (LoadInfo.state_bytes)."""
        return self.target.state_bytes + (self.draft.state_bytes if self.draft else 0)


@dataclass(frozen=True)
class PreparedPrompt:
    """A chat rendered for the target.

    Attributes:
        tokens: the prompt tokens.
        plan: which messages were kept and which dropped to fit the context.
    """

    tokens: tuple[int, ...]
    plan: ContextPlan


def check_pair(target: Path, draft: Path) -> tuple[bool, str]:
    """Compatibility of a draft with a target, from their metadata alone: a draft model's
    vocabulary, or an assistant's architecture (it has no vocabulary to compare)."""
    from specchat.models.compat import check_compatible
    from specchat.models.drafter_check import ASSISTANT_TARGETS, check_assistant

    architecture = _architecture(draft).replace("_", "-")
    if architecture in ASSISTANT_TARGETS:
        verdict = check_assistant(target, draft)
    else:
        verdict = check_compatible(target, draft)
    return verdict.ok, verdict.reason


def _architecture(path: Path) -> str:
    """A GGUF file's general.architecture ("" where it has none or cannot be read: the
    checks that follow say why)."""
    from specchat.models.gguf_format import GGUFError
    from specchat.models.gguf_reader import read_metadata

    try:
        meta = read_metadata(path, keys=("general.architecture",), arrays=False)
    except GGUFError:
        return ""
    return str(meta.values.get("general.architecture") or "")


def head_architecture(path: Path) -> str | None:
    """The architecture of a draft file that is a head over the target's hidden state, not
    a model of its own (a Gemma 4 assistant, an EAGLE-3 or DFlash draft), or None."""
    architecture = _architecture(path)
    return architecture if architecture in head_architectures() else None


def _apply_markers(
    choice: TemplateChoice, target: LlamaModel, draft: LlamaModel | None
) -> tuple[str, ...]:
    """Hide the format's markers, end turns on its end-of-turn tokens; returns the end-of-turn
    texts that are no single token (they can only be caught as text)."""
    as_text: list[str] = []
    for model in (target, draft):
        if model is None:
            continue
        ids = {text: model.single_token(text) for text in choice.markers + choice.end_of_turn}
        model.hide_tokens([token for token in ids.values() if token is not None])
        ends = {ids[text] for text in choice.end_of_turn}
        model.end_of_turn = model.end_of_turn | {token for token in ends if token is not None}
        if model is target:
            as_text = [text for text in choice.end_of_turn if ids[text] is None]
    return tuple(as_text)


def _workers_released(rounds: Iterator[RoundResult]) -> Iterator[RoundResult]:
    """`rounds`, then the answering thread's compute workers let go: the next answer may come
    from another thread (an API server's beside a bench's own), and idle workers of one thread
    slow every pass of another (engine/llamacpp/compute_threads.py)."""
    with workers_released():
        yield from rounds


def _other_cpu() -> float:
    # Read through the module at each call: a test run quiets it there (tests/conftest.py).
    return profiling.other_cpu_seconds()


class ChatEngine:
    """A target (and optional draft) model ready to chat.

    Attributes:
        pair: the loaded pair, built once here and handed to the decoder (which builds its
            drafters on it), the host and the bench: the models, their cost tables, and the
            session's suffix index.
        target: the target model (the pair's, as the llama.cpp model the host drives).
        draft: the draft model, or None (the pair's).
        head: the draft file loaded as a head over the target's hidden state where it is
            one (a Gemma 4 assistant, an EAGLE-3 or DFlash draft), or None (the pair's).
        decoder: the speculative decoder over them.
        said: what was said before this chat (earlier chats, API chats, attached files),
            for the drafters that copy: the one door into the session's suffix index.
        costs: the machine's cost tables for this pair, which `auto` prices passes with.
        estimates: what its drafters learnt in earlier sessions, and what this one stores.
        profiler: measures those tables a pass at a time, between answers.
        template: the target's chat template, compiled in the sandbox.
        prompt_tokens: turns a chat into prompt tokens through the template, the messages'
            text read as text.
        template_choice: which template that is (the file's own or its family's) and why.
        stop_texts: end-of-turn texts that are not one token here: the answer stops at them.
        info: what loading did.
    """

    def __init__(
        self,
        target: LlamaModel,
        draft: LlamaModel | None,
        *,
        compat_reason: str = "",
        cost_store: CostStore | None = None,
        head: HiddenStateHead | None = None,
    ) -> None:
        # The machine's stored cost tables (empty ones the first time): `auto` prices passes
        # from them, and the profiler fills them between answers (see engine/costs/profiling.py).
        # The bench gives a first answer after a load an empty store of its own.
        self.target = target
        self.draft = draft
        self.head = head
        store = cost_store or CostStore()
        self.costs = load_costs(target, draft, store=store)
        # The suffix index is this session's: fed through one door, handed to the drafters.
        self.said = SaidIndex()
        pair = LoadedPair.of(target, draft, head=head, costs=self.costs, index=self.said.index)
        files = head_files(pair)
        # What the drafters learnt in this pair's earlier sessions, stored beside its cost
        # tables: they start there (see drafting/stored_estimates.py).
        self.estimates = StoredEstimates.beside(
            store.folder, pair_key(target, draft, files), other_cpu=_other_cpu
        )
        self.pair = replace(pair, estimates=self.estimates)
        # Each head's table is stored under the file its weights come from, which the pair
        # tells; the drafters built on the pair (by the decoder, next) price with them.
        self.costs.heads.update(load_head_costs(target, files, store=store))
        auto = AutoPolicy(gpu=target.info.gpu_layers > 0, costs=self.costs)
        self.decoder = SpeculativeDecoder(self.pair, auto=auto)
        self.profiler = PairProfiler(
            self.costs, target, draft, heads=self.decoder.drafters.heads(), store=store
        )
        self.template_choice = choose_template(
            target.chat_template(),
            architecture=target.metadata("general.architecture") or "",
            has_token=lambda text: target.single_token(text) is not None,
        )
        self.template = ChatTemplate(
            self.template_choice.source,
            bos_token=target.token_text(target.bos) if target.bos >= 0 else "",
            eos_token=target.token_text(target.eos) if target.eos >= 0 else "",
        )
        self.stop_texts = _apply_markers(self.template_choice, target, draft)
        self.prompt_tokens = PromptTokenizer(
            target,
            self.template,
            markers=self.template_choice.markers + self.template_choice.end_of_turn,
        )
        # Reading the vocabulary's special tokens takes a few tenths of a second on a
        # 150k vocabulary: part of the load, not of the first answer's wait.
        self.prompt_tokens.load()
        self.info = EngineInfo(
            target.info,
            draft.info if draft else None,
            compat_reason,
            drafting_refused=self.decoder.drafting_refused,
            template_note=self.template_choice.note,
            template_guessed=self.template_choice.guessed,
            drafters=self.decoder.drafters.names(),
            head_labels=tuple(
                d.listing.label for d in self.decoder.drafters if isinstance(d, HeadDrafter)
            ),
            thinking_switch=THINKING_SWITCH in self.template.source,
        )

    @classmethod
    def load(
        cls,
        target: str | Path,
        draft: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        target_gpu_layers: int = -1,
        draft_gpu_layers: int = -1,
        n_threads: int | None = None,
        progress: Callable[[LoadProgress], None] | None = None,
        cancel: threading.Event | None = None,
        cost_store: CostStore | None = None,
        kv_cache: str = KV_CACHES[0],
        remote: RemoteTarget | None = None,
        own_head: bool = True,
    ) -> ChatEngine:
        """Load a pair, checking the draft's vocabulary before any weights are read
        (`cost_store`: where its cost tables are kept, by default the user's cache;
        `kv_cache`: how a CPU context stores keys, one of KV_CACHES; `remote`: other
        machines the target's layers spread over, the draft and heads staying here;
        `own_head=False` leaves a target's own MTP layers unloaded, to measure it without)."""
        if kv_cache not in KV_CACHES:
            raise ValueError(f"unknown KV cache {kv_cache!r} (use {' or '.join(KV_CACHES)})")
        target = Path(target)
        compat_reason = ""
        if draft is not None:
            draft = Path(draft)
            if progress:
                progress(LoadProgress("checking", 0.0, 0.0))
            ok, compat_reason = check_pair(target, draft)
            if not ok:
                raise IncompatibleDraftError(f"the draft cannot serve this target: {compat_reason}")
        share = 0.75 if draft is not None else 1.0

        def report(stage: str, offset: float, weight: float) -> Callable[[float], None]:
            def on_fraction(fraction: float) -> None:
                if progress:
                    progress(LoadProgress(stage, fraction, offset + weight * fraction))

            return on_fraction

        target_model = LlamaModel(
            target,
            n_ctx=n_ctx,
            n_gpu_layers=target_gpu_layers,
            n_threads=n_threads,
            progress=report("target", 0.0, share),
            cancel=cancel,
            exact_keys=kv_cache == "q8_0",
            load_mtp=own_head,
            remote=remote,
            # Snapshots for the longest draft a mode makes (MAX_K: the K slider's, and the
            # draft model's and heads' under auto); a longer copy falls back to a checkpoint.
            snapshot_depth=MAX_K,
        )
        draft_model = None
        head = None
        architecture = head_architecture(draft) if draft is not None else None
        if draft is not None and architecture is not None:
            try:
                head = load_head(
                    draft,
                    architecture,
                    target_model,
                    n_gpu_layers=draft_gpu_layers,
                    progress=report("draft", share, 1.0 - share),
                    cancel=cancel,
                )
            except BaseException:
                target_model.close()
                raise
        elif draft is not None:
            try:
                draft_model = LlamaModel(
                    draft,
                    n_ctx=n_ctx,
                    n_gpu_layers=draft_gpu_layers,
                    n_threads=n_threads,
                    progress=report("draft", share, 1.0 - share),
                    cancel=cancel,
                    exact_keys=kv_cache == "q8_0",
                )
            except BaseException:
                target_model.close()
                raise
        try:
            return cls(
                target_model,
                draft_model,
                compat_reason=compat_reason,
                cost_store=cost_store,
                head=head,
            )
        except BaseException:
            # A refused chat template must not leave both models' memory held until the GC.
            target_model.close()
            if draft_model is not None:
                draft_model.close()
            raise

    def head_files(self) -> dict[str, Path]:
        """The file each of its draft heads' weights come from, by drafter (what their cost
        tables are stored under)."""
        return head_files(self.pair)

    def close(self) -> None:
        """Store what the drafters learnt (see StoredEstimates) and free the models."""
        self.estimates.save()
        self.target.close()
        if self.draft is not None:
            self.draft.close()

    # --- prompts -----------------------------------------------------------------------------
    def render(self, messages: Sequence[ChatMessage]) -> str:
        return self.template.render(messages, add_generation_prompt=True)

    def tokenize_prompt(self, text: str) -> list[int]:
        """Tokens of a text that is all template (no one's message in it): the template
        writes BOS itself when the model wants one, and its special tokens (<|im_start|>)
        are parsed as the control tokens they are. A chat goes through `prepare`."""
        return self.target.tokenize(text, add_special=False, parse_special=True)

    def prepare(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
        tools: Sequence[Mapping[str, Any]] | None = None,
        answer_prefix: str = "",
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> PreparedPrompt:
        """Render the chat, dropping the oldest turns if it would not fit with the answer.

        `tools`: the functions the model may call (OpenAI's shape), written by the template;
        `answer_prefix`: what the answer is made to start with (PromptTokenizer.tokens);
        `template_kwargs`: the request's own template variables (enable_thinking).
        Each candidate chat is rendered and tokenized once: the one that fits is the one
        whose tokens were counted."""
        budget = max(1, self.target.n_ctx - min(max_tokens, self.target.n_ctx // 2))
        counted: dict[tuple[int, ...], list[int]] = {}

        def tokens_of(chat: Sequence[ChatMessage]) -> list[int]:
            key = tuple(map(id, chat))
            if key not in counted:
                counted[key] = self.prompt_tokens.tokens(
                    chat, tools=tools, answer_prefix=answer_prefix, extra=template_kwargs
                )
            return counted[key]

        kept, plan = fit_messages(
            messages, budget=budget, count_tokens=lambda chat: len(tokens_of(chat)), policy=policy
        )
        return PreparedPrompt(tuple(tokens_of(kept)), plan)

    # --- generation --------------------------------------------------------------------------
    def generate(
        self, request: GenerationRequest, *, cancel: threading.Event | None = None
    ) -> Generation:
        """The one way to generate: stream the rounds of `request` (the model's own
        end-of-turn texts stop it too). The returned Generation is iterated for its rounds and
        steered (`Generation.steer`) while it streams; `prepare` turns a chat into the tokens.
        """
        request = replace(request, stop_strings=(*request.stop_strings, *self.stop_texts))
        generation = self.decoder.generate(request, cancel=cancel)
        # How each answer ends decides whether what it taught the drafters is stored.
        generation.watch(self.estimates.watching)
        generation.watch(_workers_released)
        return generation
