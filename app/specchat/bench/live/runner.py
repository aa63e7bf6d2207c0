"""Runs every mode on every prompt in one process and compares each run with plain's."""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from specchat.bench.live.ceiling import lookup_ceiling
from specchat.bench.live.first_answer import FirstAnswer
from specchat.bench.live.index_cost import measure_index_cost
from specchat.bench.live.physical import FloorRun, PhysicalCosts, cpp_floor, measure_physical
from specchat.bench.live.records import RoundLog, RunRecord, Variant
from specchat.bench.live.sessions import Sessions
from specchat.bench.live.trace import AnswerTrace, record_trace
from specchat.bench.prompts import BenchPrompt
from specchat.engine.drafting.registry import AUTO, PLAIN, Drafters, needs_model, reads_target
from specchat.engine.llamacpp.backend import compute_backends
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, SamplingParams

#: The pseudo-mode of llama.cpp's own decode loop in the run order.
FLOOR = "floor"
#: In the modes asked for: every drafter with a head over the target's hidden state that the
#: loaded pair offers (which those are is known once it is loaded).
HEADS = "heads"


@dataclass(frozen=True)
class BenchConfig:
    """What to run.

    Attributes:
        modes: drafting modes (plain is always added: every speed-up is against it); HEADS
            stands for every head drafter the pair offers, and a drafter the pair cannot
            serve is left out (see for_pair).
        ks: draft lengths for the fixed modes (lookup, draft, chain, the heads).
        temperatures: sampling temperatures.
        sampled_modes: modes also run at temperatures above 0 (plain is always one).
        max_tokens: answer length limit.
        repeat: how many times the whole set runs.
        floor: also run llama.cpp's own decode loop (temperature 0) per prompt.
        physical: measure batch and draft costs first.
        seed: base seed of sampled runs (each prompt and repeat derives its own).
        first_answer: also time the first answer after a fresh load, plain against auto
            (see bench/live/first_answer.py; run by the command, which can load pairs).
    """

    modes: tuple[str, ...] = (PLAIN, "lookup", "draft", HEADS, AUTO)
    ks: tuple[int, ...] = (4,)
    temperatures: tuple[float, ...] = (0.0, 0.8)
    sampled_modes: tuple[str, ...] = (PLAIN, AUTO)
    max_tokens: int = 128
    repeat: int = 1
    floor: bool = True
    physical: bool = True
    seed: int = 1234
    first_answer: bool = True


@dataclass(frozen=True)
class BenchProgress:
    """Progress of a bench run.

    Attributes:
        done: runs finished.
        total: runs planned.
        label: what runs next (or just ran, when done == total).
        finished: whether `label` just ran (False: it is about to).
        last: the engine run that just finished, if any.
    """

    done: int
    total: int
    label: str
    finished: bool = False
    last: RunRecord | None = None


class PeersRun(Protocol):
    """The peers' answers beside the bench's (bench/peers/peers_table.py's PeersOutcome):
    what the report reads of them, so that this room, run before the peers', knows none."""

    def section(self, specchat: Sequence[RunRecord]) -> dict[str, Any]:
        """The report's peers section, SpecChat's own runs among the peers."""
        ...


@dataclass(frozen=True)
class BenchOutcome:
    """Everything measured.

    Attributes:
        records: every engine run.
        floors: llama.cpp's own loop per (prompt, repeat).
        physical: batch and draft costs, if measured.
        config: what was asked.
        info: load details for the report header.
        ceilings: per prompt, the best speed-up any lookup policy could reach on plain's
            T = 0 answer with the measured pass costs (see bench/live/ceiling.py).
        traces: per prompt, every drafter's proposal at every position of plain's T = 0
            answer, so any policy can be replayed on other costs (see bench/hindsight/replay.py).
        first_answer: the first answers after a fresh load (empty when not measured).
        kv_cache: the KV cache the run used and each cache type's batch noise on its
            target (bench/live/kv_noise.py; empty when not measured).
        peers: with --peers, the peers' run (bench/peers/peers_table.py's PeersOutcome;
            None when not run).
    """

    records: tuple[RunRecord, ...]
    floors: dict[tuple[str, int], FloorRun]
    physical: PhysicalCosts | None
    config: BenchConfig
    info: dict[str, object]
    ceilings: dict[str, float] = field(default_factory=dict)
    traces: dict[str, AnswerTrace] = field(default_factory=dict)
    first_answer: tuple[FirstAnswer, ...] = ()
    kv_cache: dict[str, object] = field(default_factory=dict)
    peers: PeersRun | None = None


def for_pair(config: BenchConfig, drafters: Drafters) -> BenchConfig:
    """`config` for a loaded pair: HEADS becomes the head drafters it offers, and a drafter
    it cannot serve is left out (the decoder would run another mode in its place)."""
    heads = tuple(name for name in drafters.names() if reads_target(name))

    def offered(modes: tuple[str, ...]) -> tuple[str, ...]:
        named = [m for mode in modes for m in (heads if mode == HEADS else (mode,))]
        return tuple(dict.fromkeys(m for m in named if m in (AUTO, PLAIN) or m in drafters))

    return replace(config, modes=offered(config.modes), sampled_modes=offered(config.sampled_modes))


def variants_for(config: BenchConfig, *, temperature: float, has_draft: bool) -> list[Variant]:
    """The runs of one prompt at one temperature, plain first (rotation happens later)."""
    modes = [PLAIN, *[m for m in config.modes if m != PLAIN]]
    if temperature > 0:
        modes = [m for m in modes if m == PLAIN or m in config.sampled_modes]
    if not has_draft:
        modes = [m for m in modes if not needs_model(m)]
    out: list[Variant] = []
    for mode in modes:
        if mode not in (AUTO, PLAIN):  # a drafter: one run per K
            out.extend(Variant(mode, k) for k in config.ks)
        else:
            out.append(Variant(mode, None))
        if mode == PLAIN and temperature == 0 and config.floor:
            out.append(Variant(FLOOR, None))
    return out


def plan_runs(
    prompts: Sequence[BenchPrompt], config: BenchConfig, *, has_draft: bool
) -> list[tuple[int, BenchPrompt, float, Variant, int]]:
    """(repeat, prompt, temperature, variant, turn) in run order.

    Modes alternate within each prompt (each turn of a session), and the order rotates from
    one to the next, so slow drift (thermal throttling, other load on the machine) hits every
    mode alike. A session's turns run in order: a turn follows plain's answer to the one before.
    """
    plan = []
    rotation = 0
    for repeat in range(config.repeat):
        for prompt in prompts:
            for temperature in config.temperatures:
                variants = variants_for(config, temperature=temperature, has_draft=has_draft)
                for turn in range(prompt.turn_count):
                    shift = rotation % len(variants)
                    rotation += 1
                    for variant in variants[shift:] + variants[:shift]:
                        plan.append((repeat, prompt, temperature, variant, turn))
    return plan


def _seed(config: BenchConfig, prompt: BenchPrompt, repeat: int) -> int:
    return (config.seed + zlib.crc32(prompt.id.encode()) + 7919 * repeat) & 0x7FFFFFFF


def prime(engine: ChatEngine, tokens: Sequence[int]) -> None:
    """Leave both caches holding prompt[:-1], as a chat turn's prompt evaluation would.

    Every mode then starts from the same state: no run pays (or skips) a prompt or draft
    prefill that another run paid for it.
    """
    for model in (engine.target, engine.draft):
        if model is None:
            continue
        cached = model.sync(tokens[:-1])
        if cached < len(tokens) - 1:
            model.decode(tokens[cached:-1], logits="none")


def run_one(
    engine: ChatEngine,
    prompt: BenchPrompt,
    tokens: Sequence[int],
    variant: Variant,
    *,
    temperature: float,
    repeat: int,
    config: BenchConfig,
) -> RunRecord:
    """Generate once and collect tokens, margins, timings and what each round did."""
    prime(engine, tokens)
    sampling = SamplingParams(temperature=temperature, seed=_seed(config, prompt, repeat))
    controls = Controls(variant.mode, variant.k or 0, sampling)
    out_tokens: list[int] = []
    margins: list[float] = []
    text: list[str] = []
    logs: list[RoundLog] = []
    last = None
    first_token: float | None = None
    began = previous = time.perf_counter()
    prediction: tuple[int, ...] = ()
    if prompt.prediction:
        # As an API request's prediction is read: text, never control tokens.
        prediction = tuple(engine.target.tokenize(prompt.prediction, parse_special=False))
    request = GenerationRequest(tuple(tokens), config.max_tokens, controls, prediction=prediction)
    for result in engine.generate(request):
        now = time.perf_counter()
        # Timed from outside the engine: what a user waits for, whatever the engine counts.
        if first_token is None and result.events:
            first_token = now
        for event in result.events:
            out_tokens.append(event.token)
            margins.append(event.margin)
            text.append(event.text)
        if result.stop is None or result.events or result.drafted:
            logs.append(
                RoundLog(
                    mode=result.choice.mode,
                    k=result.choice.k,
                    drafted=result.drafted,
                    accepted=result.accepted,
                    draft_ms=result.draft_ms,
                    verify_ms=result.verify_ms,
                    wall_ms=(now - previous) * 1000.0,
                    reason=result.choice.reason,
                    origin=next((e.origin for e in result.events if e.origin), ""),
                )
            )
        previous = now
        last = result
    assert last is not None
    stats = last.stats
    # An answer that ends before any token (an immediate end of turn) is done at its end.
    first_token = previous if first_token is None else first_token
    return RunRecord(
        prompt=prompt.id,
        category=prompt.category,
        variant=variant,
        temperature=temperature,
        repeat=repeat,
        tokens=tuple(out_tokens),
        margins=tuple(margins),
        text="".join(text),
        elapsed_s=stats.elapsed_s,
        ttft_ms=(first_token - began) * 1000.0,
        total_ms=(previous - began) * 1000.0,
        rounds=stats.rounds,
        drafted=stats.drafted,
        accepted=stats.accepted,
        draft_ms=stats.draft_ms,
        verify_ms=stats.verify_ms,
        prompt_ms=stats.prompt_ms,
        position_drafted=stats.position_drafted,
        position_accepted=stats.position_accepted,
        stop=last.stop.name.lower() if last.stop else "",
        round_logs=tuple(logs),
    )


def run_bench(
    engine: ChatEngine,
    prompts: Sequence[BenchPrompt],
    config: BenchConfig,
    *,
    progress: Callable[[BenchProgress], None] | None = None,
) -> BenchOutcome:
    """Measure the physical costs, then run the plan; one process, one loaded pair (the
    outcome's config names the modes it ran: see for_pair)."""
    has_draft = engine.draft is not None
    config = for_pair(config, engine.decoder.drafters)
    heads = engine.decoder.drafters.heads()
    prepared = {
        p.id: engine.prepare(
            [ChatMessage(m["role"], m["content"]) for m in p.messages()],
            max_tokens=config.max_tokens,
        ).tokens
        for p in prompts
    }
    plan = plan_runs(prompts, config, has_draft=has_draft)
    total = len(plan) + (1 if config.physical else 0)
    done = 0
    physical = None
    if config.physical:
        if progress:
            progress(BenchProgress(done, total, "physical costs"))
        physical = measure_physical(
            engine.target, engine.draft, prepared[prompts[0].id], heads=heads
        )
        # The cost table `auto` prices passes with, measured here as the window measures it
        # between answers (stored: a later run reuses it).
        engine.profiler.run()
        done += 1
        if progress:
            progress(BenchProgress(done, total, "physical costs", finished=True))
    # One short unmeasured generation pages the weights in, so the first timed run is not
    # the one that pays for it.
    warm = prompts[0]
    run_one(
        engine,
        warm,
        prepared[warm.id],
        Variant("plain", None),
        temperature=0.0,
        repeat=0,
        config=BenchConfig(max_tokens=8),
    )
    # And each drafter that runs a model or a head, so none pays for its first pass timed.
    warmed = ["draft"] if has_draft else []
    warmed += [mode for mode in config.modes if reads_target(mode)]
    for mode in warmed:
        run_one(
            engine,
            warm,
            prepared[warm.id],
            Variant(mode, 2),
            temperature=0.0,
            repeat=0,
            config=BenchConfig(max_tokens=4),
        )
    records: list[RunRecord] = []
    floors: dict[tuple[str, int], FloorRun] = {}
    sessions = Sessions(engine, max_tokens=config.max_tokens)
    # Every answered prompt's tokens (a session's later turns included), for the ceilings.
    asked: dict[tuple[str, int], tuple[int, ...]] = {}
    for repeat, prompt, temperature, variant, turn in plan:
        label = f"{prompt.id} · {variant.label} · T={temperature:g}"
        label += f" · turn {turn}" if prompt.turns else ""
        if progress:
            progress(BenchProgress(done, total, label))
        turn_prompt = sessions.prompt(prompt, turn, temperature, repeat, records)
        if variant.mode == FLOOR:
            if turn == 0:
                floors[(prompt.id, repeat)] = cpp_floor(
                    engine.target, prepared[prompt.id], max_tokens=config.max_tokens
                )
                label += f" {floors[(prompt.id, repeat)].tokens_per_s:.1f} tok/s"
            last = None
        else:
            sessions.recall(prompt, turn, temperature, repeat, records)
            asked[(prompt.id, turn)] = tuple(turn_prompt.tokens)
            last = run_one(
                engine,
                prompt,
                turn_prompt.tokens,
                variant,
                temperature=temperature,
                repeat=repeat,
                config=config,
            )
            last = replace(
                last,
                turn=turn,
                prompt_tokens=len(turn_prompt.tokens),
                prompt_evaluated=turn_prompt.evaluated,
            )
            records.append(last)
        done += 1
        if progress:
            progress(BenchProgress(done, total, label, finished=True, last=last))
    info: dict[str, object] = {
        **bench_info(engine),
        "prompt_tokens": {pid: len(t) for pid, t in prepared.items()},
        "index_cost": measure_index_cost([*prepared.values(), *(r.tokens for r in records)]),
    }
    ceilings: dict[str, float] = {}
    traces: dict[str, AnswerTrace] = {}
    for record in records:
        if record.variant.mode == PLAIN and record.temperature == 0 and record.repeat == 0:
            # A session's later turn is named as the report names it ("id#1").
            name = record.prompt if record.turn == 0 else f"{record.prompt}#{record.turn}"
            tokens = asked.get((record.prompt, record.turn), prepared[record.prompt])
            if physical is not None:
                ceilings[name] = lookup_ceiling(tokens, record.tokens, physical.batch_ms)
            traces[name] = record_trace(
                name,
                tokens,
                record.tokens,
                draft_model=engine.draft,
                heads=heads,
                target=engine.target,
                margins=record.margins,
            )
    return BenchOutcome(tuple(records), floors, physical, config, info, ceilings, traces)


def bench_info(engine: ChatEngine) -> dict[str, object]:
    """The pair and how it ran, for a report's header."""
    return {
        "target": engine.info.target.description,
        "target_file": engine.info.target.path.name,
        "draft": engine.info.draft.description if engine.info.draft else None,
        "draft_file": engine.info.draft.path.name if engine.info.draft else None,
        "backend": engine.info.target.backend,
        # Which CPU kernels ran: the portable bundle picks one per CPU at start.
        "kernels": compute_backends().describe(),
        "threads": engine.info.target.n_threads,
    }


def geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0
