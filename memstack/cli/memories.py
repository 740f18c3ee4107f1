"""The commands over a user's memory: ``add`` (a message, its layers' jobs queued in the same
transaction), ``context`` (the next model call's context under a token budget), ``threads``,
``history``, ``forget`` (asks first on a terminal, needs --yes elsewhere), ``search``, and the
record views (``entities``, ``graph``, ``state``, ``audit``, ``usage``; ``usage`` over the tenant
is ``settings.cmd_usage``). An unknown user or thread is "not found", exit 1, as the REST API's
404; ``context`` and ``search`` say on stderr when some of the user's jobs have not run yet."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import InvalidInput, NotFound, UsageError
from ..memory import Memory
from ..types import RECORD_KINDS
from ..views import plural
from .common import PRESET_NAMES, _at, _emit, _memory, _require_user
from .options import _command
from .settings import cmd_usage


def declare_add(sub: Any) -> None:
    """``memstack add``: one message, or stdin's (``-``)."""
    p = _command(
        sub,
        "add",
        "store a message in a thread and queue the layers' work on it",
        "docs/library.md",
        "The message and the layers' jobs (indexing, extraction) are stored in one transaction; `memstack worker` runs the jobs, or --wait before returning. `-` reads the text from stdin, less the one newline that ends it (`echo` adds it); the rest is kept.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--role", required=True, choices=["user", "assistant", "system"])
    p.add_argument("--at", help="ISO 8601 timestamp of the message (default: now)")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("text", help="the message text, or - to read it from stdin")
    p.add_argument(
        "--strategy", help="check that the store's profile writes with these layers (default: the store's profile; see `memstack init`)"
    )
    p.add_argument("--preset", help="check that the store's profile is this preset: " + ", ".join(PRESET_NAMES))
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) before returning")
    p.set_defaults(run=cmd_add)


def cmd_add(args: argparse.Namespace) -> None:
    text = _read_text(args.text)
    at = _at(args)
    _one_stack(args)
    with _memory(args, layers=args.strategy, preset=args.preset) as mem:
        stored = mem.add({"role": args.role, "content": text}, user_id=args.user, thread_id=args.thread, agent_id=args.agent, at=at)
        if args.wait:
            mem.flush(user_id=args.user)
    data = [m.to_dict() | {"seq": m.seq} for m in stored]
    _emit(args, {"stored": data}, lambda: "\n".join(f"stored {m.id} ({m.role}, {m.timestamp.isoformat()})" for m in stored))


def _read_text(value: str) -> str:
    """The message text, or stdin's for ``-``, less the one newline that ends what ``echo`` or a
    file gives (the shell's $(...) strips it too); any other whitespace is the user's and kept."""
    if value != "-":
        return value
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"stdin is not valid UTF-8 (byte {exc.start})", field="text") from exc
    return text.removesuffix("\r\n") if text.endswith("\r\n") else text.removesuffix("\n")


def _one_stack(args: argparse.Namespace) -> None:
    if getattr(args, "preset", None) and getattr(args, "strategy", None):
        raise UsageError("give --preset or --strategy, not both")


def declare_context(sub: Any) -> None:
    """``memstack context``: the store's profile, or another stack or preset to read with."""
    p = _command(
        sub,
        "context",
        "print the context for the next model call",
        "docs/layers.md",
        "Built with the store's profile, or read with another stack (--strategy) or preset; the whole context never exceeds --max-tokens under the token counter, and the report says what each part cost and what was dropped. It says on stderr how many of the user's jobs have not run yet (--wait runs them first).",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--query", help="the user's next message (not stored)")
    p.add_argument("--at", help="reference time, ISO 8601 (default: now)")
    p.add_argument("--strategy", help="read with this layer or comma-separated stack (default: the store's profile)")
    p.add_argument("--preset", help="read with a scenario stack instead: " + ", ".join(PRESET_NAMES))
    p.add_argument("--k", type=int, help="turns kept by the window layer")
    p.add_argument("--max-tokens", type=int, default=4000, help="token budget of the whole context (default: %(default)s)")
    p.add_argument("--tokenizer", default="estimate", help="token counter: estimate, cl100k_base, o200k_base or a model name")
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) first")
    p.set_defaults(run=cmd_context)


def _settle_jobs(args: argparse.Namespace, mem: Memory) -> None:
    """``--wait``: run the user's queued jobs first."""
    if getattr(args, "wait", False):
        mem.flush(user_id=args.user)


def _note_pending(args: argparse.Namespace, mem: Memory) -> None:
    """Say on stderr that some of the user's jobs wait: a search right after ``add`` would
    otherwise silently miss what is not indexed yet."""
    waiting = mem.pending(user_id=args.user)
    if waiting:
        print(
            f"memstack: note: {plural(waiting, 'job')} of user {args.user!r} not run yet (new messages not yet indexed or extracted); run `memstack worker --once` or pass --wait",
            file=sys.stderr,
        )
        for reason in mem.ceiling.waiting(args.tenant, args.user):
            print(f"memstack: note: {reason}", file=sys.stderr)


def cmd_context(args: argparse.Namespace) -> None:
    at = _at(args)
    _one_stack(args)
    with _memory(args, counter=args.tokenizer, max_tokens=args.max_tokens) as mem:
        _settle_jobs(args, mem)
        ctx = mem.context(
            user_id=args.user,
            thread_id=args.thread,
            agent_id=args.agent,
            query=args.query,
            at=at,
            k=args.k,
            strategy=args.strategy,
            preset=args.preset,
        )
        _note_pending(args, mem)
    _emit(args, ctx.to_dict(), lambda: _render_context(ctx))


def _render_context(ctx) -> str:
    lines = [f"[{m.role}] {m.text}" for m in ctx.messages]
    parts = ", ".join(f"{k} {v}" for k, v in ctx.sections.items() if v)
    lines.append(f"-- {plural(ctx.tokens, 'token')} ({ctx.counter}{'; ' + parts if parts else ''}), budget {ctx.max_tokens}")
    for d in ctx.dropped:
        lines.append(f"-- dropped {plural(len(d.message_ids), 'message')}, {d.tokens} tokens: {d.layer}: {d.reason}")
    return "\n".join(lines)


def declare_threads(sub: Any) -> None:
    """``memstack threads``."""
    p = _command(
        sub,
        "threads",
        "list a user's threads",
        "docs/library.md",
        "A user the tenant does not have: `no such user 'x'`, exit 1 (the REST API's 404 user_not_found); a known user with nothing to show: an empty list, exit 0.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.set_defaults(run=cmd_threads)


def _require_thread(mem: Memory, args: argparse.Namespace) -> None:
    """An unknown thread (or user) is not found (exit 1), as REST's 404."""
    if not any(t.thread_id == args.thread for t in mem.threads(user_id=args.user, agent_id=args.agent)):
        _require_user(mem, args)
        raise NotFound(f"user {args.user!r} has no thread {args.thread!r}", field="thread_id")


def cmd_threads(args: argparse.Namespace) -> None:
    with _memory(args) as mem:
        infos = mem.threads(user_id=args.user, agent_id=args.agent)
        if not infos:
            _require_user(mem, args)
    data = [
        {
            "thread_id": t.thread_id,
            "agent_id": t.agent_id,
            "messages": t.messages,
            "first_at": t.first_at.isoformat(),
            "last_at": t.last_at.isoformat(),
        }
        for t in infos
    ]
    _emit(
        args,
        data,
        lambda: "\n".join(
            f"{t.thread_id}\t{plural(t.messages, 'message')}\t{t.first_at.isoformat()} .. {t.last_at.isoformat()}" for t in infos
        ),
    )


def declare_history(sub: Any) -> None:
    """``memstack history``."""
    p = _command(
        sub,
        "history",
        "print a thread's messages, in time order",
        "docs/library.md",
        "Ties as stored: a message added later with an earlier --at goes in its place (as GET .../messages and Memory.history()). A user the tenant does not have: `no such user 'x'`; a thread the user lacks: `user 'x' has no thread 'y'`; both exit 1.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--last", type=int, help="only the last N messages")
    p.set_defaults(run=cmd_history)


def cmd_history(args: argparse.Namespace) -> None:
    with _memory(args) as mem:
        msgs = mem.history(user_id=args.user, thread_id=args.thread, agent_id=args.agent, last=args.last)
        if not msgs:
            _require_thread(mem, args)
    _emit(args, [m.to_dict() for m in msgs], lambda: "\n".join(f"{m.timestamp.isoformat()} [{m.role}] {m.text}" for m in msgs))


def declare_forget(sub: Any) -> None:
    """``memstack forget``: a thread, or a user with everything they own."""
    p = _command(
        sub,
        "forget",
        "delete a thread, or a user with everything they own",
        "docs/privacy.md",
        "A user's messages, memories, saved memories and LangGraph checkpoints go, with a deletion note left in the same transaction (what, when, by whom, how many rows of what; no content). On a terminal it asks first; elsewhere it needs --yes.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", help="only this thread (default: the user with everything they own)")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=cmd_forget)


def cmd_forget(args: argparse.Namespace) -> None:
    what = f"thread {args.thread!r} of user {args.user!r}" if args.thread else f"user {args.user!r} and everything they own"
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to delete {what} without confirmation: pass --yes")
        answer = input(f"Delete {what} (tenant {args.tenant!r})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            _emit(args, {"deleted": 0}, lambda: "nothing deleted")
            return
    with _memory(args) as mem:
        n = mem.forget(user_id=args.user, thread_id=args.thread, agent_id=args.agent, by="cli")
    _emit(args, {"deleted": n}, lambda: f"deleted {what}: {plural(n, 'record')}")


def declare_records(sub: Any) -> None:
    """The record views, one command each: entities, graph, state, audit, usage."""
    for name, what in (
        ("entities", "a user's entities"),
        ("graph", "a user's relations"),
        ("state", "a user's JSON state"),
        ("audit", "the audit trail of a user's model-made memory"),
        ("usage", "the tenant's model calls and tokens per user, against its budget (--user: one user's calls)"),
    ):
        p = _command(sub, name, f"print {what}", "docs/costs.md" if name == "usage" else "docs/layers.md")
        p.add_argument("--user", required=name != "usage", help="the user's id")
        if name == "usage":
            p.add_argument("--since", help="only calls from then on: an ISO 8601 date or time (default: every call)")
        p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
        if name == "audit":
            p.add_argument("--kind", choices=RECORD_KINDS, help="only records of this kind")
            p.add_argument("--limit", type=int, default=100, help="records at most (default: %(default)s)")
        p.set_defaults(run=cmd_records, what=name)


def cmd_records(args: argparse.Namespace) -> None:
    from .. import views

    if args.what == "usage" and (args.user is None or args.since):
        return cmd_usage(args)
    with _memory(args) as mem:
        scope = mem.scope(args.user, agent_id=args.agent)
        data = views.VIEWS[args.what](mem.store, scope, **({"kind": args.kind, "limit": args.limit} if args.what == "audit" else {}))
    _emit(args, data, lambda: views.render(args.what, data))


def declare_search(sub: Any) -> None:
    """``memstack search``."""
    p = _command(
        sub,
        "search",
        "search a user's memories across threads",
        "docs/retrieval.md",
        "Hybrid search (BM25, dense vectors, sentence keys, feedback) over the units of every thread of the user, with the dates a question names read relative to --at. It says on stderr how many of the user's jobs have not run yet (--wait runs them first).",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--k", type=int, default=8, help="results at most (default: %(default)s)")
    p.add_argument("--at", help="reference time for dates in the query, ISO 8601 (default: now)")
    p.add_argument("--thread", action="append", help="only these threads (repeatable)")
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) first")
    p.add_argument("query", help="what to look for, in the user's words")
    p.set_defaults(run=cmd_search)


def cmd_search(args: argparse.Namespace) -> None:
    from ..types import SearchFilter

    at = _at(args)
    where = SearchFilter(thread_ids=tuple(args.thread)) if args.thread else None
    options = {"embedder": args.embedder} if args.embedder else {}
    with _memory(args) as mem:
        _settle_jobs(args, mem)
        hits = mem.search(args.query, user_id=args.user, agent_id=args.agent, k=args.k, at=at, where=where, **options)
        _note_pending(args, mem)
    data = [
        {
            "id": h.unit.id,
            "score": round(h.score, 6),
            "text": h.unit.text,
            "thread_id": h.unit.scope.thread_id,
            "timestamp": h.unit.timestamp.isoformat(),
            "source_ids": list(h.unit.source_ids),
            "ranks": dict(h.ranks),
        }
        for h in hits
    ]
    _emit(
        args,
        data,
        lambda: (
            "\n".join(f"{h.score:.4f}  [{h.unit.timestamp.date()} {h.unit.scope.thread_id}] {h.unit.text}" for h in hits)
            or "no relevant memories"
        ),
    )
