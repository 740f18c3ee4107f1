"""Benchmark: context() with token trimming on a 10,000-message thread, beside LangChain's trim_messages.

Same messages, same budget, same token counter (memstack's, per message, summed) in the same run:

- memstack ``Memory.context(strategy="trim")`` on a SQLite file (reads the thread from disk)
- memstack ``budget.trim()`` on the messages in memory
- ``langchain_core.messages.trim_messages`` on the same messages converted to LangChain objects

    python bench/context_bench.py [--messages 10000] [--budget 4000] [--counter estimate] [--runs 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memstack import Memory, Message, get_counter
from memstack.budget import trim

LINES_ZH = [
    "我正在开发一个知识中台，后端使用SpringBoot。",
    "文档检索用Elasticsearch，缓存用Redis。",
    "预算是30万元，明年3月上线。",
    "帮我列一个汇报提纲。",
    "好的，我们先从项目背景说起。",
]
LINES_EN = [
    "Can you help me plan the migration to PostgreSQL?",
    "Sure: first inventory the tables, then dual-write for a week.",
    "What about the 3 TB of logs?",
    "Archive them to object storage before the cut-over.",
]


def make_messages(n: int) -> list[Message]:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    msgs = [Message(role="system", content="你是一个能够记住历史对话的AI助手。", timestamp=start)]
    for i in range(n - 1):
        role = "user" if i % 2 == 0 else "assistant"
        pool = LINES_ZH if (i // 10) % 2 == 0 else LINES_EN
        text = " ".join(pool[(i + j) % len(pool)] for j in range(1 + i % 3))
        msgs.append(Message(role=role, content=f"{text} (#{i})", timestamp=start + timedelta(seconds=i)))
    return msgs


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 3),
    }


def timed(fn, runs: int) -> tuple[list[float], object]:
    result = fn()  # warm-up (fills caches, as a long-running service would be)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    return samples, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--counter", default="estimate")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages

    counter = get_counter(args.counter)
    msgs = make_messages(args.messages)
    by_id = {m.id: m for m in msgs}
    cls = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    lc_msgs = [cls[m.role](content=m.text, id=m.id) for m in msgs]

    def lc_count(items) -> int:
        return sum(counter.count_message(by_id[x.id]) for x in items)

    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(Path(tmp) / "bench.db", max_tokens=args.budget, counter=counter)
        memory.add(msgs, user_id="bench", thread_id="long")
        ours_ctx, ctx = timed(lambda: memory.context(user_id="bench", thread_id="long", strategy="trim"), args.runs)
        cold_memory = Memory(Path(tmp) / "bench.db", max_tokens=args.budget, counter=args.counter)
        t = time.perf_counter()
        cold_memory.context(user_id="bench", thread_id="long", strategy="trim")
        cold = time.perf_counter() - t
        memory.close()
        cold_memory.close()
    ours_trim, kept = timed(lambda: trim(msgs, args.budget, counter), args.runs)
    lc_trim, lc_kept = timed(
        lambda: trim_messages(
            lc_msgs,
            max_tokens=args.budget,
            token_counter=lc_count,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        ),
        args.runs,
    )
    same = [m.id for m in kept] == [m.id for m in lc_kept]
    result = {
        "messages": args.messages,
        "budget": args.budget,
        "counter": counter.name,
        "runs": args.runs,
        "kept_messages": len(kept),
        "same_result_as_langchain": same,
        "memstack_context_sqlite": percentiles(ours_ctx),
        "memstack_context_cold_ms": round(cold * 1000, 3),
        "memstack_trim": percentiles(ours_trim),
        "langchain_trim_messages": percentiles(lc_trim),
        "context_tokens": ctx.tokens,
    }
    result["ratio_langchain_over_context_p50"] = round(
        result["langchain_trim_messages"]["p50_ms"] / result["memstack_context_sqlite"]["p50_ms"], 1
    )
    result["ratio_langchain_over_trim_p50"] = round(result["langchain_trim_messages"]["p50_ms"] / result["memstack_trim"]["p50_ms"], 1)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{args.messages} messages, budget {args.budget} tokens ({counter.name}), {args.runs} runs, kept {len(kept)}; same result as LangChain: {same}"
    )
    print("| what | p50 ms | p95 ms |\n|---|---|---|")
    for label, key in (
        ("memstack Memory.context(strategy='trim'), SQLite", "memstack_context_sqlite"),
        ("memstack budget.trim(), in memory", "memstack_trim"),
        ("langchain_core trim_messages, in memory", "langchain_trim_messages"),
    ):
        print(f"| {label} | {result[key]['p50_ms']} | {result[key]['p95_ms']} |")
    print(f"cold context() (new process state, empty caches): {result['memstack_context_cold_ms']} ms")
    print(
        f"LangChain p50 / memstack context() p50 = {result['ratio_langchain_over_context_p50']}x; / memstack trim() p50 = {result['ratio_langchain_over_trim_p50']}x"
    )
    if not same:
        sys.exit("results differ from LangChain's")


if __name__ == "__main__":
    main()
