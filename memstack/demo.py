"""``memstack demo``: replay a bundled Chinese conversation and show the context each strategy builds.

Runs on the embedded defaults (a SQLite file, the estimator), with no server, key or network, and
finishes. The conversation is dated (two sessions a week apart) and read back with ``at``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from .backends import DB_FILENAME, default_home
from .memory import Memory
from .types import Context, parse_time
from .views import plural

USER = "user_001"
QUERY = "我的后端使用什么技术？"

#: (title, strategy, options, max_tokens): the articles' strategies, one by one and layered.
STRATEGIES: list[tuple[str, str, dict[str, Any], int | None]] = [
    ("全量历史 full history", "full", {}, None),
    ("滑动窗口 sliding window, k=2 turns", "window", {"k": 2}, None),
    ("Token 裁剪 token-budget trim, 150 tokens (cl100k_base)", "trim", {"counter": "cl100k_base"}, 150),
    ("窗口 + 裁剪 window k=4 then trim, 150 tokens", "window,trim", {"k": 4}, 150),
]


def demo_records() -> list[dict[str, Any]]:
    text = resources.files("memstack").joinpath("data/demo_zh.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def replay(memory: Memory, records: list[dict[str, Any]]) -> int:
    """Add the bundled conversation, message by message, as an app would (dates kept)."""
    n = 0
    for rec in records:
        message = {k: v for k, v in rec.items() if k != "thread_id"}
        n += len(memory.add(message, user_id=USER, thread_id=rec["thread_id"]))
    return n


def show(title: str, ctx: Context) -> None:
    print(f"\n=== {title}")
    for m in ctx.messages:
        print(f"  [{m.role}] {m.text}")
    parts = ", ".join(f"{k} {v}" for k, v in ctx.sections.items() if v)
    print(f"  -> {plural(len(ctx.messages), 'message')}, {plural(ctx.tokens, 'token')} ({ctx.counter}{': ' + parts if parts else ''})")
    for d in ctx.dropped:
        print(f"  -> dropped {plural(len(d.message_ids), 'message')} ({plural(d.tokens, 'token')}): {d.layer}, {d.reason}")


def run_demo(args: argparse.Namespace) -> None:
    """The demo in the store named by --db or --home (--keep: the usual home), else in a temporary
    directory that is removed when the demo ends, so that repeated runs leave nothing behind."""
    if args.db or args.home or args.keep:
        _demo(args.db or (Path(args.home).expanduser() if args.home else default_home()) / DB_FILENAME, args.tenant)
        return
    with tempfile.TemporaryDirectory(prefix="memstack-demo-", ignore_cleanup_errors=True) as tmp:
        _demo(Path(tmp) / DB_FILENAME, args.tenant, temporary=True)


def _demo(target: str | Path, tenant: str, *, temporary: bool = False) -> None:
    records = demo_records()
    print(f"memstack demo: store {target}" + (" (temporary, removed at the end; --keep stores it in the home)" if temporary else ""))
    with Memory(str(target), tenant=tenant) as memory:
        memory.forget(user_id=USER)
        added = replay(memory, records)
        threads = memory.threads(user_id=USER)
        print(
            f"replayed {plural(added, 'message')} into {plural(len(threads), 'thread')} of {USER}: "
            + ", ".join(f"{t.thread_id} ({t.messages})" for t in threads)
        )
        at = parse_time(records[[r["thread_id"] for r in records].index("s2") - 1]["timestamp"])
        print(f"\nthread s1 as of {at.isoformat()}, next question: {QUERY}")
        for title, strategy, options, budget in STRATEGIES:
            ctx = memory.context(user_id=USER, thread_id="s1", query=QUERY, at=at, strategy=strategy, max_tokens=budget, **options)
            show(title, ctx)
    _restart_check(target, at)
    _layered(target, records)


def _layered(target: str | Path, records: list[dict[str, Any]]) -> None:
    """The articles' layered stack: the window holds this turn, the vector store spans sessions."""
    with Memory(str(target), layers=["window", "retrieval"]) as memory:
        memory.forget(user_id=USER)
        replay(memory, records)
        report = memory.flush()
        print(f"\nwrite queue: {plural(report.ran, 'job')} ran (embedding and indexing every round), {report.failed} failed")
        at = parse_time(records[-1]["timestamp"]) + timedelta(days=3)
        for question in (QUERY, "我喜欢什么运动？", "量子计算的原理是什么？"):
            ctx = memory.context(user_id=USER, thread_id="s3", query=question, at=at, k=2, max_tokens=600)
            show(f"分层组合 window + retrieval, a new session three days later: {question}", ctx)


def _restart_check(target: str | Path, at: datetime) -> None:
    """The articles' history3 check: a new process on the same file continues the conversation."""
    with Memory(str(target)) as memory:
        n = len(memory.history(user_id=USER, thread_id="s1"))
        ctx = memory.context(user_id=USER, thread_id="s1", query="我叫什么名字？", at=at, strategy="window", k=1, max_tokens=None)
        print(f"\nafter a restart: thread s1 still holds {plural(n, 'message')}; the window continues from them:")
        for m in ctx.messages:
            print(f"  [{m.role}] {m.text}")
