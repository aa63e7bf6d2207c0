"""Catalog pairs for subcommands: a pair by id and its files on disk; problems as UserErrors."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.engine.costs.store import CostStore
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget
    from specchat.engine.session import ChatEngine
    from specchat.models.catalog import Catalog, ModelPair


def load_pairs() -> Catalog:
    """The catalog; a broken one is a UserError."""
    from specchat.models.catalog import CatalogError, load_catalog

    try:
        return load_catalog()
    except CatalogError as error:
        raise UserError(str(error)) from None


def find_pair(pair_id: str) -> ModelPair:
    """The catalog pair `pair_id`; an unknown one is a UserError."""
    from specchat.models.catalog import CatalogError

    try:
        return load_pairs().get(pair_id)
    except CatalogError as error:
        raise UserError(str(error)) from None


def pair_on_disk(pair_id: str) -> tuple[Path, Path | None]:
    """The pair's target and draft files; missing ones are a UserError saying how to fetch them."""
    from specchat.models.catalog import CatalogError
    from specchat.models.target_files import pair_files

    try:
        return pair_files(pair_id)
    except CatalogError as error:
        raise UserError(str(error)) from None


def model_files(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """The target and draft files a command was given (--target/--draft, else --pair's,
    else the default pair's), each checked before anything loads: a folder, a missing or
    unreadable file, or one that is no GGUF is a one-line UserError."""
    from specchat.engine.llamacpp.load import check_file
    from specchat.engine.llamacpp.model import ModelLoadError

    if args.target is not None:
        target, draft = args.target, args.draft
    elif args.draft is not None:
        raise UserError("--draft needs --target (or use --pair)")
    else:
        target, draft = pair_on_disk(args.pair or "default")
    for path in (target, draft):
        if path is None:
            continue
        try:
            check_file(path)
        except ModelLoadError as error:
            raise UserError(str(error)) from None
    return target, draft


def describe_load(engine: ChatEngine) -> str:
    """What a command says once its pair has loaded: where the target runs and how its
    cache stores keys, and the draft with its compatibility (lines ending in a newline)."""
    info = engine.info
    target = info.target
    text = (
        f"target: {target.description} on {target.backend} "
        f"({target.gpu_layers}/{target.n_layers + 1} layers on GPU), "
        f"{target.n_threads} threads, keys stored as {target.key_type}\n"
    )
    if info.draft:
        text += f"draft: {info.draft.description}; {info.compat_reason}\n"
    if info.head_labels:
        text += f"drafts from the target's hidden state: {', '.join(info.head_labels)}\n"
    if info.drafting_refused:
        text += f"note: {info.drafting_refused}\n"
    if target.remote:
        text += f"target spread over RPC servers: {target.remote} (drafts stay here)\n"
    return text


def add_rpc_arguments(parser: argparse.ArgumentParser) -> None:
    """--rpc and --tensor-split: the target's layers spread over other machines."""
    parser.add_argument(
        "--rpc",
        default="",
        metavar="HOST:PORT[,HOST:PORT…]",
        help="spread the target's layers over these `specchat rpc-server`s as well "
        "(the draft stays here)",
    )
    parser.add_argument(
        "--tensor-split",
        default="",
        metavar="A,B,…",
        help="with --rpc: this machine's share of the layers, then each server's "
        "(default: in proportion to free memory)",
    )


def remote_target(args: argparse.Namespace) -> RemoteTarget | None:
    """The servers --rpc names (None without), or a UserError saying what is wrong."""
    servers = getattr(args, "rpc", "") or ""
    if not servers.strip():
        if getattr(args, "tensor_split", ""):
            raise UserError("--tensor-split needs --rpc")
        return None
    from specchat.engine.llamacpp.rpc_placement import RemoteTarget

    try:
        return RemoteTarget.parse(servers, getattr(args, "tensor_split", "") or "")
    except ValueError as error:
        raise UserError(f"--rpc: {error}") from None


def add_kv_cache_argument(parser: argparse.ArgumentParser) -> None:
    """--kv-cache, from the setting's declaration (its choices, default and description)."""
    from specchat import settings as cfg

    parser.add_argument(
        "--kv-cache",
        choices=cfg.KV_CACHE.allowed(),
        default=cfg.KV_CACHE.default,
        help=cfg.KV_CACHE.description + f" (default: {cfg.KV_CACHE.default})",
    )


def load_engine(
    target: Path,
    draft: Path | None,
    args: argparse.Namespace,
    *,
    label: str = "",
    cost_store: CostStore | None = None,
    own_head: bool = True,
) -> ChatEngine:
    """The pair loaded with the command's --ctx, --threads and --gpu-layers; a file that
    will not load is a UserError (named by `label` where several are loaded). `cost_store`:
    where its cost tables are kept (by default the user's cache); `own_head=False`: the
    target without its own MTP layers."""
    from specchat.engine.llamacpp.model import ModelLoadError
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.guards import ChatTemplateError
    from specchat.engine.types import KV_CACHES

    try:
        return ChatEngine.load(
            target,
            draft,
            n_ctx=args.ctx,
            n_threads=args.threads,
            target_gpu_layers=args.gpu_layers,
            draft_gpu_layers=args.gpu_layers,
            cost_store=cost_store,
            kv_cache=getattr(args, "kv_cache", KV_CACHES[0]),
            remote=remote_target(args),
            own_head=own_head,
        )
    except (ModelLoadError, ChatTemplateError) as error:
        raise UserError(f"{label}: {error}" if label else str(error)) from None
