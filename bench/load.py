"""Benchmark: the memory service under concurrent clients, on loopback, bounded in time and count.

Starts ``memstack serve`` as its own process on a free 127.0.0.1 port (a fresh tenant on the given
store), then runs ``--clients`` concurrent clients for ``--seconds`` (or until ``--max-requests``):
each adds a user message to its own user's thread (POST .../messages) and builds the context for
the next question (POST .../context), in a loop. Reported per operation: requests, throughput,
p50/p95/p99 latency and errors (target 0). Then the server gets SIGTERM (graceful shutdown), the
store is opened directly, and every acknowledged message is looked up: ``lost`` must be 0.

    python bench/load.py --clients 50 --seconds 60 [--db sqlite:///FILE | --db postgresql://...] [--strategy window,retrieval] [--model PROVIDER:MODEL] [--json]

``--model``: the server's ``--model`` (default: its own, the local model, which ``memstack serve``
loads before it reports ready); the clients never call it, so ``vllm:none@http://127.0.0.1:9/v1``
measures the same requests without loading a model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx

from memstack import Memory

OPS = ("add", "context")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def op_summary(latencies: list[float], elapsed: float) -> dict:
    """Requests, throughput and p50/p95/p99 in ms of one operation's latencies (seconds)."""
    return {
        "requests": len(latencies),
        "per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
        "p95_ms": round(percentile(latencies, 0.95) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str, tenant: str, strategy: str, port: int, model: str | None = None) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "memstack",
        "serve",
        "--db",
        db,
        "--tenant",
        tenant,
        "--port",
        str(port),
        "--strategy",
        strategy,
        "--log-level",
        "warning",
        *(["--model", model] if model else []),
    ]
    env = {k: v for k, v in os.environ.items() if k != "MEMSTACK_API_KEYS"}
    return subprocess.Popen(command, env=env)


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"memstack serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("memstack serve did not become healthy")


class Stats:
    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.acknowledged: dict[str, list[str]] = defaultdict(list)
        self.requests = 0


async def client(n: int, url: str, run: str, deadline: float, max_requests: int, stats: Stats) -> None:
    user = f"load-{run}-{n}"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        i = 0
        while time.monotonic() < deadline and stats.requests < max_requests:
            text = f"第{i}条消息：我正在开发一个知识中台，今天处理了第{i}个问题"
            for op, path, body in (
                ("add", f"/v1/users/{user}/threads/t/messages", {"messages": [{"role": "user", "content": text}]}),
                ("context", f"/v1/users/{user}/threads/t/context", {"query": "我在开发什么？", "max_tokens": 1000}),
            ):
                stats.requests += 1
                started = time.perf_counter()
                try:
                    r = await http.post(path, json=body)
                except httpx.HTTPError as exc:
                    stats.errors[f"{op}: {type(exc).__name__}"] += 1
                    continue
                stats.latency[op].append(time.perf_counter() - started)
                if r.status_code >= 400:
                    stats.errors[f"{op}: {r.status_code} {r.json().get('error', {}).get('code')}"] += 1
                elif op == "add":
                    stats.acknowledged[user].append(text)
            i += 1


async def drive(url: str, run: str, clients: int, seconds: float, max_requests: int) -> tuple[Stats, float]:
    stats = Stats()
    started = time.monotonic()
    await asyncio.gather(*(client(n, url, run, started + seconds, max_requests, stats) for n in range(clients)))
    return stats, time.monotonic() - started


def count_lost(db: str, tenant: str, acknowledged: dict[str, list[str]], keep: bool) -> tuple[int, int]:
    """(stored, lost): messages the store holds for the run's users, and acknowledged ones it lacks."""
    stored = lost = 0
    with Memory(db, tenant=tenant) as memory:
        for user, texts in acknowledged.items():
            held = {m.text for m in memory.history(user_id=user, thread_id="t")}
            stored += len(held)
            lost += sum(1 for t in texts if t not in held)
            if not keep:
                memory.forget(user_id=user)
    return stored, lost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--max-requests", type=int, default=1_000_000, help="stop after this many requests in all (default: %(default)s)")
    ap.add_argument("--db", help="store URL (default: a fresh SQLite file)")
    ap.add_argument(
        "--strategy", default="window", help="the server's layers (default: %(default)s; model-backed layers would load the local model)"
    )
    ap.add_argument("--model", help="the server's --model (default: the server's default, the local model)")
    ap.add_argument("--keep", action="store_true", help="keep the run's users in the store")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not 0 < args.clients <= 500 or not 0 < args.seconds <= 600:
        raise SystemExit("--clients must be in 1..500 and --seconds in (0, 600]")

    with tempfile.TemporaryDirectory(prefix="memstack-load-") as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'load.db'}"
        run = uuid.uuid4().hex[:8]
        tenant = f"load-{run}"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_server(db, tenant, args.strategy, port, args.model)
        try:
            wait_healthy(url, server)
            stats, elapsed = asyncio.run(drive(url, run, args.clients, args.seconds, args.max_requests))
            server.send_signal(signal.SIGTERM)
            server.wait(120)
        finally:
            if server.poll() is None:
                server.kill()
        stored, lost = count_lost(db, tenant, stats.acknowledged, args.keep)

    report = {
        "db": db.split("://")[0],
        "strategy": args.strategy,
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "ops": {op: op_summary(stats.latency[op], elapsed) for op in OPS},
        "errors": dict(stats.errors),
        "acknowledged": sum(len(v) for v in stats.acknowledged.values()),
        "stored": stored,
        "lost": lost,
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return
    print(f"{report['db']}, strategy {args.strategy}, {args.clients} clients, {report['seconds']} s")
    for op, s in report["ops"].items():
        print(
            f"  {op:<8} {s['requests']:>7} requests  {s['per_second']:>7} /s   p50 {s['p50_ms']} ms  p95 {s['p95_ms']} ms  p99 {s['p99_ms']} ms"
        )
    print(f"  errors: {sum(stats.errors.values())} {dict(stats.errors) or ''}")
    print(f"  acknowledged adds {report['acknowledged']}, stored {stored}, lost {lost}")


if __name__ == "__main__":
    main()
