"""The commands over the store's configuration and upkeep: ``init`` (the profile every process
writes with, kept in the store per tenant, with its retention policy and cost ceilings),
``config`` (what is configured and what waits), ``retention`` (the policy and its last pass, or a
pass now), the tenant's ``usage`` against its budget, and ``reindex`` (re-embed, or cut the
threads into units again). ``init`` opens the store itself, not a Memory: opening one would
write a default profile first."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..backends import open_store
from ..errors import UsageError
from ..memory import Memory
from ..types import in_range, parse_time
from ..views import plural
from .common import PRESET_NAMES, _emit, _memory
from .options import _command


def declare_init(sub: Any) -> None:
    """``memstack init``: the profile, the retention policy and the budget."""
    p = _command(
        sub,
        "init",
        "configure the store's memory: the layers every process writes with, the chat model, the embedder",
        "docs/library.md",
        "The profile (the layers or the preset, their options, the chat model, the embedder, the token counter) is kept in the store, one per tenant, and every process that opens the store writes with it. A new store's default is window,retrieval (no model calls). A store already configured otherwise is refused: --reconfigure replaces the profile, queues every thread for the new layers (they read each thread from its start; run `memstack worker`) and, for a new embedder, re-embeds every unit.",
    )
    stack = p.add_mutually_exclusive_group()
    stack.add_argument("--preset", help="a scenario stack: " + ", ".join(PRESET_NAMES))
    stack.add_argument("--strategy", help="a stack of layers (default: window,retrieval: no model calls)")
    p.add_argument("--model", help="chat model of the model-backed layers: local (default) or a provider string, e.g. ollama:qwen3:8b")
    p.add_argument("--embedder", help="embedding provider of the retrieval layer (default: local)")
    p.add_argument("--tokenizer", help="token counter: estimate (default), cl100k_base, o200k_base or a model name")
    p.add_argument("--reconfigure", action="store_true", help="replace an existing configuration and queue every thread for the new layers")
    p.add_argument(
        "--retain",
        help="how long memory is kept, e.g. messages=180d,audit=365d,usage=90d[,derived=keep] (h, d, w; default: everything for ever; docs/retention.md)",
    )
    _budget_flags(p)
    p.set_defaults(run=cmd_init)


def cmd_init(args: argparse.Namespace) -> None:
    options = {k: v for k, v in (("model", args.model), ("embedder", args.embedder)) if v}
    store = open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    try:
        profile, queued = Memory.configure(
            store,
            layers=args.strategy,
            preset=args.preset,
            options=options,
            counter=args.tokenizer,
            tenant=args.tenant,
            reconfigure=args.reconfigure,
            vectors=args.vectors,
            retention=args.retain,
            budget=_budget_of(args, store),
        )
    finally:
        store.close()
    queued_line = f"\nqueued {plural(queued, 'thread')} for the new layers: run `memstack worker --once`" if queued else ""
    _emit(
        args,
        {"profile": profile.to_dict(), "store": store.url, "queued_threads": queued},
        lambda: f"{store.url} (tenant {args.tenant}): {profile.describe()}{_retain_line(profile)}{queued_line}",
    )


def _budget_flags(p: argparse.ArgumentParser) -> None:
    """``init``'s cost ceilings (``memstack.costs``): kept in the profile, enforced by every worker and server."""
    p.add_argument(
        "--budget",
        action="append",
        help="the model-backed layers' ceiling: tokens=N/PERIOD for the tenant, tokens=N/PERIOD/user for each user (PERIOD: hour, day, month; UTC); repeatable or comma-separated. Jobs past it wait until the next period",
    )
    p.add_argument(
        "--answer-budget",
        help="what the proxy's answers may spend per user: tokens=N/PERIOD; past it the proxy answers 429 with Retry-After",
    )


def _budget_of(args: argparse.Namespace, store: Any) -> Any:
    """The budget ``init`` writes: the flags given over the stored one (None: no flag given)."""
    from ..costs import Budget
    from ..profile import Profile

    if not args.budget and not args.answer_budget:
        return None
    given = Budget.parse(args.budget or (), args.answer_budget)
    raw = store.profiles.get(args.tenant) if getattr(store, "profiles", None) is not None else None
    return given.over(Profile.from_dict(raw).budget if raw else Budget(), layers=bool(args.budget), answers=bool(args.answer_budget))


def declare_config(sub: Any) -> None:
    """``memstack config``."""
    p = _command(
        sub, "config", "show the store's memory configuration: the store, the tenant, the layers and the jobs waiting", "docs/library.md"
    )
    p.set_defaults(run=cmd_config)


def cmd_config(args: argparse.Namespace) -> None:
    from .. import expiry

    with _memory(args) as mem:
        profile, url, pending = mem.profile, mem.store.url, mem.pending()
        last = expiry.last_run(mem.store, args.tenant)
        waiting = mem.ceiling.waiting(args.tenant)
    data = {
        "store": url,
        "tenant": args.tenant,
        "profile": profile.to_dict(),
        "pending_jobs": pending,
        "budget": profile.budget.describe(),
        "waiting": waiting,
    }
    data["retention"] = {"policy": profile.retention.to_dict(), "last_run": last.to_dict() if last else None}
    budget = f"\nbudget  {profile.budget.describe()}" + "".join(f"\n        {w}" for w in waiting)
    _emit(
        args,
        data,
        lambda: (
            f"store   {url}\ntenant  {args.tenant}\nmemory  {profile.describe()}\npending {plural(pending, 'job')}{budget}\n"
            + _retention_lines(profile.retention, last)
        ),
    )


def _retain_line(profile: Any) -> str:
    """``memstack init``'s line of the retention policy, when the profile has one."""
    return "" if profile.retention.keeps_everything else f"\nretain {profile.retention.describe()}"


def _retention_lines(policy: Any, last: Any) -> str:
    """``memstack config``'s and ``memstack retention``'s lines: the policy and the last pass."""
    return f"retain  {policy.describe()}\nlast    {last.describe() if last else 'no retention pass yet'}"


def declare_retention(sub: Any) -> None:
    """``memstack retention [show|run]``."""
    p = _command(
        sub,
        "retention",
        "show the tenant's retention policy and its last pass, or run a pass now",
        "docs/retention.md",
        "`memstack retention` shows how long the tenant's memory is kept (`memstack init --retain`) and what the last pass deleted; `memstack retention run` deletes now what is older than the policy (for cron; `memstack worker` also does it, at most once an hour per tenant): messages, audit events and model calls past their kind's duration, and the memories made from expired messages only, each user's with a deletion note by `retention`.",
    )
    p.add_argument("action", nargs="?", choices=["show", "run"], default="show", help="show (default) or run a pass now")
    p.set_defaults(run=cmd_retention)


def cmd_retention(args: argparse.Namespace) -> None:
    from .. import expiry

    with _memory(args) as mem:
        done = expiry.run(mem.store, args.tenant, index=mem.vectors) if args.action == "run" else None
        policy, last = expiry.policy_of(mem.store, args.tenant), expiry.last_run(mem.store, args.tenant)
    if args.action == "run" and done is None:
        note = "the tenant keeps everything (no retention policy: `memstack init --reconfigure --retain ...`); nothing deleted"
        _emit(args, {"tenant": args.tenant, "policy": policy.to_dict(), "run": None}, lambda: note)
        return
    data = {"tenant": args.tenant, "policy": policy.to_dict(), "last_run": last.to_dict() if last else None}
    _emit(args, data, lambda: _retention_lines(policy, last))


def cmd_usage(args: argparse.Namespace) -> None:
    from ..ceiling import render, report

    since = None
    if args.since:
        text = args.since + ("T00:00:00Z" if len(args.since) == 10 else "")
        since = in_range(parse_time(text, field_name="--since"), field_name="--since")
    with _memory(args) as mem:
        data = report(mem.ceiling, args.tenant, user_id=args.user, since=since)
    _emit(args, data, lambda: render(data))


def declare_reindex(sub: Any) -> None:
    """``memstack reindex``: re-embed, or ``--rechunk``."""
    p = _command(
        sub,
        "reindex",
        "re-embed every memory (after changing the embedder), or cut the threads into units again",
        "docs/retrieval.md",
        "--rechunk cuts every thread into units again (stores indexed before 280-token chunks keep their older units until then); facts and other units stay, and the old units are replaced only once the new ones are stored. In Milvus the units go into a new generation that the collection's alias then moves to.",
    )
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument(
        "--rechunk",
        action="store_true",
        help="cut every thread into units again (after a change of chunk size; older stores used 200 tokens)",
    )
    p.add_argument("--chunk-tokens", type=int, help="with --rechunk: the largest unit in tokens (default: the layer's, 280)")
    p.set_defaults(run=cmd_reindex)


def cmd_reindex(args: argparse.Namespace) -> None:
    from ..layers.retrieval import reindex

    if args.chunk_tokens is not None and (not args.rechunk or args.chunk_tokens < 20):
        raise UsageError("--chunk-tokens goes with --rechunk and is at least 20")
    switched: list[Any] = []
    with _memory(args) as mem:
        options = {"chunk_tokens": args.chunk_tokens} if args.chunk_tokens else {}
        progress = None if args.json else lambda done: print(f"\r{plural(done, 'unit')}", end="", file=sys.stderr)
        n = reindex(
            mem.store, args.embedder, rechunk=args.rechunk, progress=progress, vectors=mem.vectors, on_switch=switched.append, **options
        )
    data: dict[str, Any] = {"reindexed": n}
    if switched:
        data.update(serving=switched[0].serving, previous=switched[0].previous, dropped=list(switched[0].dropped))
    _emit(args, data, lambda: f"\nreindexed {plural(n, 'unit')}" + (_switch_line(switched[0]) if switched else ""))


def _switch_line(switch: Any) -> str:
    """What a reindex into a new collection did, for the reader who owns the server."""
    line = f" into collection {switch.serving}, now searched" if switch.serving else "; the index is empty"
    if switch.previous:
        line += f"; {switch.previous} is kept, no longer searched (a way back), until the next reindex drops it"
    if switch.dropped:
        line += f"; dropped older generations {', '.join(switch.dropped)}"
    return line
