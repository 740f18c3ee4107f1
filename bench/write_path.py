"""Benchmark: what the model-backed write path costs on one LoCoMo conversation.

Every turn of the conversation is added, as a chat app would, with all of issue 4's layers enabled
(summary, entities, graph, state, plus retrieval) at their default batch sizes, while a worker
drains the queue: a thread of the same process (``--worker thread``) or a separate
``memstack worker`` process (``--worker process``, the deployment we recommend). Reported: the
model calls, their prompt + completion tokens (the model's own counts) and time, against the
conversation's own token count in the model's tokenizer; and add() latency while the worker runs.

    python bench/write_path.py --data ../shared/data/locomo/locomo_dev.json --conv conv-26 [--worker process] [--model local] [--sessions N] [--pace S] [--keep FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from memstack import Memory
from memstack.evaluation.datasets import load
from memstack.llm import get_chat_model

LAYERS = ["summary", "entities", "graph", "state", "retrieval"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--conv", default="conv-26")
    ap.add_argument("--model", default="local")
    ap.add_argument("--worker", choices=["thread", "process"], default="process")
    ap.add_argument("--sessions", type=int, help="only the first N sessions")
    ap.add_argument(
        "--pace", type=float, default=0.2, help="seconds between two adds, so that adding overlaps the worker (default: %(default)s)"
    )
    ap.add_argument("--keep", metavar="FILE", help="keep the SQLite store here (e.g. for: memstack bench recall --reuse FILE)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    conv = next(c for c in load("locomo", args.data) if c.id == args.conv)
    sessions = conv.sessions[: args.sessions] if args.sessions else conv.sessions
    model = get_chat_model(args.model)
    conv_tokens = sum(model.count_tokens(t.text) for s in sessions for t in s.turns)
    turns = sum(len(s.turns) for s in sessions)

    with tempfile.TemporaryDirectory(prefix="memstack-write-") as tmp:
        db = Path(args.keep) if args.keep else Path(tmp) / "bench.db"
        mem = Memory(db, layers=LAYERS, options={"model": model})
        worker = None
        started = time.perf_counter()
        if args.worker == "thread":
            mem.start_worker(poll_seconds=0.5)
        else:
            env = {**os.environ, "MEMSTACK_LLM_THREADS": os.environ.get("MEMSTACK_LLM_THREADS", "1")}
            worker = subprocess.Popen(
                [sys.executable, "-m", "memstack", "worker", "--db", f"sqlite:///{db}", "--model", args.model, "--poll", "0.5"], env=env
            )
        latencies: list[float] = []
        for session in sessions:
            for i, t in enumerate(session.turns):
                message = {
                    "role": t.role,
                    "content": t.text,
                    "name": t.name,
                    "timestamp": (session.date + timedelta(seconds=i)).isoformat(),
                }
                t0 = time.perf_counter()
                mem.add(message, user_id=conv.id, thread_id=session.id)
                latencies.append((time.perf_counter() - t0) * 1000)
                time.sleep(args.pace)
        added = time.perf_counter()
        if worker is not None:
            while mem.store.jobs.pending() and worker.poll() is None:
                time.sleep(1.0)
            worker.terminate()
            worker.wait(30)
        else:
            while mem.store.jobs.pending():
                time.sleep(1.0)
            mem.stop_worker()
        report = mem.flush()  # the batches still waiting to fill
        finished = time.perf_counter()
        usage = mem.store.usage.read(mem.scope(conv.id))
        records = {kind: sum(len(mem.store.records.current(mem.scope(conv.id, s.id), kind)) for s in sessions) for kind in ("summary",)}
        records |= {kind: len(mem.store.records.current(mem.scope(conv.id), kind)) for kind in ("entity", "relation", "state")}
        mem.close()

    prompt = sum(u.prompt_tokens for u in usage)
    completion = sum(u.completion_tokens for u in usage)
    result = {
        "conversation": conv.id,
        "sessions": len(sessions),
        "turns": turns,
        "conversation_tokens": conv_tokens,
        "model": model.name,
        "worker": args.worker,
        "model_calls": len(usage),
        "failed_calls": sum(not u.ok for u in usage),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "tokens_per_conversation_token": round((prompt + completion) / conv_tokens, 2),
        "model_seconds": round(sum(u.latency_ms for u in usage) / 1000, 1),
        "wall_seconds": round(finished - started, 1),
        "adding_seconds": round(added - started, 1),
        "add_ms_p50": round(statistics.median(latencies), 2),
        "add_ms_p95": round(percentile(latencies, 0.95), 2),
        "add_ms_max": round(max(latencies), 2),
        "flush_failed": report.failed,
        "records": records,
    }
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return
    for k, v in result.items():
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
