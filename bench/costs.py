"""Benchmark: what one request costs, for the capacity model in docs/scaling.md.

In one process, over the real app (FastAPI through Starlette's TestClient, so no socket and no
second process), on PostgreSQL in a schema of its own (dropped at the end): ``--users`` users
each get ``--messages`` messages added one request at a time, the write queue is run, then every
user asks ``--queries`` contexts and ``--queries`` proxy calls (resending the last 10 messages;
the upstream is an OpenAI-compatible stub in this process). For each operation: CPU ms of this
process per request (the server's work plus Starlette's test client, which is small beside it),
wall ms, and PostgreSQL round trips per request (statements sent, commits and rollbacks, counted
in psycopg). Then the bytes per stored row of each table (``pg_total_relation_size`` / rows:
heap, indexes and TOAST together).

    python bench/costs.py --db postgresql://postgres@127.0.0.1:5433/postgres --strategy window,retrieval [--users 10 --messages 100 --queries 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import psycopg  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from scale import Upstream  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.backends.postgres import PostgresStore  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402

TOPICS = [
    "知识中台的权限模块",
    "搬家去苏州的事",
    "下周三的发布会",
    "the Go rewrite of the billing service",
    "my daughter's piano lessons",
    "论文第三章的实验",
    "a trip to Kyoto in April",
    "医院的排班",
]


class RoundTrips:
    """Counts what psycopg sends: each execute, executemany and COPY, each commit and rollback."""

    def __init__(self) -> None:
        self.count = 0

    @contextmanager
    def counting(self):
        patched = []
        for cls, names in ((psycopg.Cursor, ("execute", "executemany", "copy")), (psycopg.Connection, ("commit", "rollback"))):
            for name in names:
                original = getattr(cls, name)

                def wrapper(*a, __original=original, **k):
                    self.count += 1
                    return __original(*a, **k)

                setattr(cls, name, wrapper)
                patched.append((cls, name, original))
        try:
            yield self
        finally:
            for cls, name, original in patched:
                setattr(cls, name, original)


def message(user: int, i: int) -> str:
    topic = TOPICS[(user + i) % len(TOPICS)]
    if i % 2:
        return f"关于{topic}：我建议先把时间表列出来，第{i}项里最要紧的是确认负责人和截止日期，然后每周复盘一次进度，遇到阻碍及时调整。"
    return f"我今天在忙{topic}，第{i}步已经做完了，下一步要在{(i % 28) + 1}号之前交给老板看。"


class Meter:
    def __init__(self, trips: RoundTrips) -> None:
        self.trips = trips
        self.ops: dict[str, list[tuple[float, float, int]]] = {}

    @contextmanager
    def op(self, name: str):
        cpu, wall, trips = time.process_time(), time.perf_counter(), self.trips.count
        yield
        self.ops.setdefault(name, []).append((time.process_time() - cpu, time.perf_counter() - wall, self.trips.count - trips))

    def report(self) -> dict:
        out = {}
        for name, rows in self.ops.items():
            n = len(rows)
            out[name] = {
                "requests": n,
                "cpu_ms": round(sum(r[0] for r in rows) / n * 1000, 2),
                "wall_ms": round(sum(r[1] for r in rows) / n * 1000, 2),
                "round_trips": round(sum(r[2] for r in rows) / n, 2),
            }
        return out


def table_bytes(dsn: str, schema: str) -> dict:
    """Rows and bytes per table; a partitioned table's partitions counted as the table."""
    sizes: Counter = Counter()
    counts: Counter = Counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (schema,))]
        for table in tables:
            name = re.sub(r"_p\d+$", "", table)
            if name != table:  # a partition: the parent's count already holds its rows
                sizes[name] += conn.execute("SELECT pg_total_relation_size(%s)", (f'"{schema}"."{table}"',)).fetchone()[0]
                continue
            counts[name] = conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]
            sizes[name] += conn.execute("SELECT pg_total_relation_size(%s)", (f'"{schema}"."{table}"',)).fetchone()[0]
    return {t: {"rows": counts[t], "bytes": sizes[t], "bytes_per_row": round(sizes[t] / counts[t])} for t in counts if counts[t]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=os.environ.get("MEMSTACK_TEST_PG_DSN"))
    ap.add_argument("--strategy", default="window,retrieval")
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.db or not args.db.startswith(("postgresql://", "postgres://")):
        raise SystemExit("--db must be a PostgreSQL URL (or set MEMSTACK_TEST_PG_DSN)")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    trips = RoundTrips()
    meter = Meter(trips)
    store = PostgresStore(args.db, schema=schema)
    try:
        with Upstream() as upstream, trips.counting():
            memory = Memory(store, layers=args.strategy)
            app = create_app(memory, ServerConfig(model=f"vllm:stub@{upstream.url}", worker=False, max_tokens=2000))
            with TestClient(app) as http:
                for u in range(args.users):
                    for i in range(args.messages):
                        role = "assistant" if i % 2 else "user"
                        with meter.op("add (one message)"):
                            r = http.post(
                                f"/v1/users/u{u}/threads/t/messages", json={"messages": [{"role": role, "content": message(u, i)}]}
                            )
                        assert r.status_code == 201, r.text
                started_cpu, started_wall, started_trips = time.process_time(), time.perf_counter(), trips.count
                report = memory.run_jobs()
                indexed = args.users * args.messages
                jobs = {
                    "messages": indexed,
                    "jobs_run": getattr(report, "ran", None),
                    "cpu_ms_per_message": round((time.process_time() - started_cpu) / indexed * 1000, 2),
                    "wall_ms_per_message": round((time.perf_counter() - started_wall) / indexed * 1000, 2),
                    "round_trips_per_message": round((trips.count - started_trips) / indexed, 2),
                }
                for u in range(args.users):
                    for q in range(args.queries):
                        with meter.op("context"):
                            r = http.post(
                                f"/v1/users/u{u}/threads/t/context",
                                json={"query": f"{TOPICS[q % len(TOPICS)]}进展到哪一步了？", "max_tokens": 1000},
                            )
                        assert r.status_code == 200, r.text
                    history = [
                        {"role": "assistant" if i % 2 else "user", "content": message(u, i)}
                        for i in range(args.messages - 10, args.messages)
                    ]
                    for q in range(args.queries):
                        question = f"第{q}个问题：{TOPICS[q % len(TOPICS)]}什么时候要交？"
                        with meter.op("proxy call (10 messages resent)"):
                            r = http.post(
                                "/v1/chat/completions",
                                json={"model": "stub", "messages": [*history, {"role": "user", "content": question}], "user": f"u{u}"},
                                headers={"X-Memstack-Thread": "t"},
                            )
                        assert r.status_code == 200, r.text
                        history += [{"role": "user", "content": question}, r.json()["choices"][0]["message"]]
                        history = history[-10:]
            memory.close()
        result = {
            "strategy": args.strategy,
            "users": args.users,
            "messages_per_user": args.messages,
            "ops": meter.report(),
            "write_queue": jobs,
            "tables": table_bytes(args.db, schema),
        }
    finally:
        store.close()
        with psycopg.connect(args.db, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return
    print(f"{args.strategy}: {args.users} users x {args.messages} messages, PostgreSQL")
    for name, s in result["ops"].items():
        print(f"  {name:<34} {s['requests']:>5} requests  CPU {s['cpu_ms']} ms  wall {s['wall_ms']} ms  round trips {s['round_trips']}")
    j = result["write_queue"]
    print(
        f"  {'write queue (per message)':<34} {j['messages']:>5} messages  CPU {j['cpu_ms_per_message']} ms  wall {j['wall_ms_per_message']} ms  round trips {j['round_trips_per_message']}"
    )
    for table, t in result["tables"].items():
        print(f"  {table:<34} {t['rows']:>7} rows  {t['bytes_per_row']:>6} bytes/row")


if __name__ == "__main__":
    main()
