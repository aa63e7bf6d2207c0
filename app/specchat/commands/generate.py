"""`specchat generate`: stream an answer in the terminal, tokens coloured by how they were made."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specchat.commands.pairs import (
    add_kv_cache_argument,
    add_rpc_arguments,
    describe_load,
    model_files,
    remote_target,
)
from specchat.commands.user_error import UserError
from specchat.engine.drafting.registry import mode_names, needs_model
from specchat.engine.types import (
    Controls,
    GenerationRequest,
    RoundResult,
    SamplingParams,
    Stats,
    TokenKind,
)
from specchat.tokenstyle import ANSI_RESET, TOKEN_MEANINGS, ansi

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine
    from specchat.store.attachment_records import Attachment


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pair", help="catalog pair id (default: the 'default' pair)")
    source.add_argument("--target", type=Path, help="target GGUF file")
    parser.add_argument("--draft", type=Path, help="draft GGUF file (with --target)")
    parser.add_argument(
        "--mode",
        default="auto",
        choices=mode_names(),  # auto, plain and every registered drafter
        help="drafting mode (default: auto)",
    )
    parser.add_argument("--k", type=int, default=4, help="draft length for fixed modes")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--n-ctx", type=int, default=4096)
    add_kv_cache_argument(parser)
    add_rpc_arguments(parser)
    parser.add_argument("--gpu-layers", type=int, default=-1, help="-1 = all that fit")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--system", default=None, help="system message")
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    parser.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour tokens by kind (auto: only on a terminal)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print every round's choice, drafted and kept tokens to stderr",
    )
    parser.add_argument("--prompt", required=True, help="the user message")
    parser.add_argument(
        "--attach",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="attach a text file to the message (repeatable)",
    )


def check_arguments(args: argparse.Namespace) -> None:
    """Raise UserError for an option no answer can be made with, before anything loads."""
    if not 0 <= args.k <= 16:
        raise UserError("--k must be between 0 and 16")
    if args.max_tokens <= 0:
        raise UserError(f"--max-tokens must be at least 1 (got {args.max_tokens})")
    if args.n_ctx <= 0:
        raise UserError(f"--n-ctx must be at least 1 (got {args.n_ctx})")
    if args.threads is not None and args.threads <= 0:
        raise UserError(f"--threads must be at least 1 (got {args.threads})")
    try:
        SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    except ValueError as error:  # NaN, infinity or out of range: its message says which
        raise UserError(str(error)) from None
    for option in ("prompt", "system", "stop"):
        values = getattr(args, option)
        for value in values if isinstance(values, list) else [values]:
            if value is not None:
                _check_text(f"--{option}", value)


def _check_text(option: str, text: str) -> None:
    # The shell hands Python undecodable bytes as lone surrogates (PEP 383): no model
    # can read them, and encoding them later would fail with a traceback.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        byte = error.object[error.start].encode("utf-8", "surrogateescape")
        raise UserError(
            f"{option} is not UTF-8 text ({byte!r} at character {error.start})"
        ) from None


def _print_legend(out: TextIO, colour: bool) -> None:
    if not colour:
        return
    parts = [
        f"{ansi(kind)}{kind.name.lower()}{ANSI_RESET} = {TOKEN_MEANINGS[kind]}"
        for kind in (TokenKind.ACCEPTED, TokenKind.CORRECTED, TokenKind.BONUS)
    ]
    out.write("  ".join(parts) + "\n\n")


def _print_round(out: TextIO, result: RoundResult, colour: bool) -> None:
    for event in result.events:
        if colour and event.kind != TokenKind.PLAIN and event.text:
            out.write(f"{ansi(event.kind)}{event.text}{ANSI_RESET}")
        else:
            out.write(event.text)
    out.flush()


def format_round(result: RoundResult) -> str:
    """One round for --stats: what the policy chose, what was drafted and kept."""
    return (
        f"round {result.index}: {result.choice.mode} K={result.choice.k}, "
        f"drafted {result.drafted}, kept {result.accepted}, {result.rows} rows "
        f"({result.choice.reason})"
    )


def format_stats(stats: Stats, *, stop: str, choice: str = "") -> str:
    lines = [
        f"stopped: {stop}",
        f"tokens: {stats.emitted} in {stats.elapsed_s:.2f} s = {stats.tokens_per_s:.1f} tok/s "
        f"(prompt: {stats.prompt_tokens} tokens in {stats.prompt_ms / 1000:.2f} s)",
        f"drafted {stats.drafted}, accepted {stats.accepted}: α = {stats.alpha:.2f}, "
        f"τ = {stats.tau:.2f} tokens per target pass over {stats.rounds} passes",
    ]
    rates = stats.position_rates()
    if rates:
        lines.append("acceptance by draft position: " + " ".join(f"{r:.2f}" for r in rates))
    if choice:
        lines.append(f"last policy choice: {choice}")
    return "\n".join(lines)


def read_attachments(paths: list[Path]) -> list[Attachment]:
    """The files of --attach, read and decoded; a UserError names the first that cannot be."""
    from specchat.engine.attachments import AttachmentError, read_attachment

    try:
        return [read_attachment(path) for path in paths]
    except AttachmentError as error:
        raise UserError(f"--attach: {error}") from None


def index_attachments(engine: ChatEngine, attachments: list[Attachment]) -> None:
    """The attachments as documents of this conversation in the suffix index, as the window
    stores them, so drafts can copy from them and say so."""
    from specchat.engine.history import ATTACHMENT_KEY, text_tokenizer

    if not attachments:
        return
    tokenize = text_tokenizer(engine)
    for position, attachment in enumerate(attachments):
        engine.said.attachment((ATTACHMENT_KEY, 0, position), tokenize(attachment.text))
    engine.said.wait_idle(timeout=60.0)


def run(args: argparse.Namespace) -> int:
    from specchat.engine.attachments import attached_message
    from specchat.engine.context import ContextOverflowError
    from specchat.engine.llamacpp.model import ContextFullError, DecodeError, ModelLoadError
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_template import ChatMessage
    from specchat.engine.templates.guards import ChatTemplateError

    check_arguments(args)
    attachments = read_attachments(args.attach)
    target, draft = model_files(args)
    mode = args.mode
    if needs_model(mode) and draft is None:
        raise UserError(f"--mode {mode} needs a draft model (--draft or a --pair)")
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    err = sys.stderr
    err.write(f"loading {target.name}" + (f" + {draft.name}" if draft else "") + " …\n")
    try:
        engine = ChatEngine.load(
            target,
            draft,
            n_ctx=args.n_ctx,
            target_gpu_layers=args.gpu_layers,
            draft_gpu_layers=args.gpu_layers,
            n_threads=args.threads,
            kv_cache=args.kv_cache,
            remote=remote_target(args),
        )
    except ModelLoadError as error:
        raise UserError(str(error)) from None
    except ChatTemplateError as error:
        raise UserError(str(error)) from None
    err.write(describe_load(engine))
    messages = []
    if args.system:
        messages.append(ChatMessage("system", args.system))
    messages.append(attached_message("user", args.prompt, attachments))
    index_attachments(engine, attachments)
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    controls = Controls(mode, args.k, sampling)
    cancel = threading.Event()
    out = sys.stdout
    _print_legend(out, colour)
    last: RoundResult | None = None
    try:
        prepared = engine.prepare(messages, max_tokens=args.max_tokens)
        request = GenerationRequest(prepared.tokens, args.max_tokens, controls, tuple(args.stop))
        for result in engine.generate(request, cancel=cancel):
            _print_round(out, result, colour)
            if args.stats and result.rows:
                err.write(format_round(result) + "\n")
            last = result
    except KeyboardInterrupt:
        cancel.set()
        out.write("\n")
        err.write("stopped\n")
        return 130
    except (ContextFullError, ContextOverflowError, ChatTemplateError) as error:
        raise UserError(str(error)) from None
    except DecodeError as error:  # a lost RPC server among them: what was printed stays
        out.write("\n")
        raise UserError(str(error)) from None
    finally:
        engine.close()
    out.write("\n")
    if last is not None:
        stop = last.stop.value if last.stop else "?"
        err.write("\n" + format_stats(last.stats, stop=stop, choice=last.choice.reason) + "\n")
    return 0
