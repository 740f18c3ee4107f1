"""Benchmark: N API processes and M workers on one PostgreSQL, under concurrent clients, with an
audit of the store afterwards. Loopback (or a private network namespace) only, bounded in time.

For each process count in ``--processes`` (a fresh tenant each), the run writes the tenant's
profile (``window,retrieval``: the workers' jobs index every message), starts that many
``memstack serve --no-worker`` processes and ``--workers`` ``memstack worker`` processes, and
runs ``--clients`` concurrent clients for ``--seconds``. Each client is one user and repeats:

- add: a user message to its REST thread (``POST .../messages`` with an ``Idempotency-Key``);
- proxy: ``POST /v1/chat/completions`` resending its whole chat thread plus a new question (the
  upstream is an OpenAI-compatible stub in this process, answering at once), with an
  ``Idempotency-Key``;
- context: ``POST .../context`` for a question (retrieval embeds the query).

The clients balance by themselves, as a load balancer would: each request goes to the next API
process, and one that refuses or drops the connection is retried on another with the same
Idempotency-Key (so a retry can never store twice). With ``--kill``, the last (largest) run
SIGKILLs one API process and one worker half-way through; the dead worker's job reruns on the
other worker when its lease (``--lease``) runs out.

Afterwards the write queue is drained (the workers keep running until nothing is pending), every
process gets SIGTERM, and the store is audited directly: every acknowledged REST message stored
exactly once, every chat thread equal to the client's view of it (roles and texts, in order),
nothing pending, every message indexed, no unit indexed twice. CPU seconds are read from
/proc for each API process, each worker, PostgreSQL's processes and this driver, so that where
the cores cap the throughput the cap is measured.

    python bench/scale.py --db postgresql://postgres@127.0.0.1:5433/postgres --processes 1,2,4 --workers 2 --clients 50 --seconds 60 --kill [--vectors milvus://127.0.0.1:19530] [--json]

With the vectors in a Milvus standalone server that the run starts itself (``pip install -e
".[milvus-server]"``): the server listens on every interface, so the whole run goes into a private
network namespace, where PostgreSQL is reached through its Unix socket:

    unshare --net --map-root-user sh -c 'ip link set lo up && exec .venv/bin/python bench/scale.py --db "postgresql://postgres@/postgres?host=/tmp/pgci/sock&port=5433" --milvus-server /tmp/milvus-bench --kill'
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))

from load import free_port, op_summary  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.replaced import visible  # noqa: E402

OPS = ("add", "proxy", "context")
CLOCK = os.sysconf("SC_CLK_TCK")


# --- the upstream model: an OpenAI-compatible stub answering at once --------------------------------


class Upstream:
    """A chat-completions server on 127.0.0.1 that answers every question with a text derived
    from it (so the audit can check that the right answer was stored)."""

    def __enter__(self) -> Upstream:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                question = next((m.get("content") for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
                answer = {
                    "id": "chatcmpl-" + uuid.uuid4().hex,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "stub"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer_to(str(question))}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
                data = json.dumps(answer, ensure_ascii=False).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()


def answer_to(question: str) -> str:
    return f"记下了：{question[-24:]}"


# --- processes -------------------------------------------------------------------------------------


def memstack_command(*args: str, db: str, tenant: str, vectors: str | None) -> list[str]:
    command = [sys.executable, "-m", "memstack", *args, "--db", db, "--tenant", tenant]
    return command + (["--vectors", vectors] if vectors else [])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (and of its children that were waited for), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / CLOCK


def postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip().startswith("postgres"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@dataclass
class Process:
    role: str
    popen: subprocess.Popen
    url: str = ""
    killed: bool = False
    cpu_at_start: float = 0.0
    cpu: float = 0.0

    def sample(self) -> None:
        if self.popen.poll() is None:
            self.cpu = cpu_seconds(self.popen.pid) - self.cpu_at_start


def wait_healthy(process: Process, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise SystemExit(f"memstack serve exited with {process.popen.returncode}")
        try:
            if httpx.get(f"{process.url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("memstack serve did not become healthy")


# --- clients ---------------------------------------------------------------------------------------


@dataclass
class Stats:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    retried: Counter = field(default_factory=Counter)
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    chats: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))


class Balancer:
    """Round-robin over the API processes; a process that drops a connection is skipped for a
    few seconds (a load balancer's health check), and the request is retried on the next one."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.down: dict[str, float] = {}
        self.next = 0

    def pick(self) -> str:
        now = time.monotonic()
        for _ in range(len(self.urls)):
            url = self.urls[self.next % len(self.urls)]
            self.next += 1
            if self.down.get(url, 0) <= now:
                return url
        return self.urls[self.next % len(self.urls)]

    def failed(self, url: str) -> None:
        self.down[url] = time.monotonic() + 5


async def send(
    http: httpx.AsyncClient, balancer: Balancer, op: str, path: str, body: dict, headers: dict, stats: Stats
) -> httpx.Response | None:
    started = time.perf_counter()
    for _attempt in range(6):
        url = balancer.pick()
        try:
            response = await http.post(url + path, json=body, headers=headers)
        except httpx.TransportError:
            balancer.failed(url)
            stats.retried[op] += 1
            continue
        stats.latency[op].append(time.perf_counter() - started)
        if response.status_code >= 400:
            stats.errors[f"{op}: {response.status_code}"] += 1
            return None
        return response
    stats.errors[f"{op}: no process answered"] += 1
    return None


async def client(n: int, run: str, balancer: Balancer, deadline: float, stats: Stats) -> None:
    user = f"u{n}"
    rng = random.Random(n)
    view: list[tuple[str, str]] = stats.chats[user]
    async with httpx.AsyncClient(timeout=120) as http:
        i = 0
        while time.monotonic() < deadline:
            text = f"[{run}:{n}:{i}] 我在做第{i}个任务：{rng.choice(['知识中台', '搬家', '写论文', '学书法', '准备面试'])}，截止日期是{rng.randint(1, 28)}号"
            response = await send(
                http,
                balancer,
                "add",
                f"/v1/users/{user}/threads/rest/messages",
                {"messages": [{"role": "user", "content": text}]},
                {"Idempotency-Key": uuid.uuid4().hex},
                stats,
            )
            if response is not None:
                stats.acknowledged[user].append(text)
            question = f"[{run}:{n}:{i}] 第{i}个任务的截止日期是哪天？"
            messages = [{"role": r, "content": c} for r, c in view] + [{"role": "user", "content": question}]
            body = {"model": "stub", "messages": messages, "user": user}
            headers = {"X-Memstack-Thread": "chat", "Idempotency-Key": uuid.uuid4().hex}
            response = await send(http, balancer, "proxy", "/v1/chat/completions", body, headers, stats)
            if response is not None:
                view.extend([("user", question), ("assistant", response.json()["choices"][0]["message"]["content"])])
            await send(
                http,
                balancer,
                "context",
                f"/v1/users/{user}/threads/rest/context",
                {"query": "我最近在做什么任务？", "max_tokens": 800},
                {},
                stats,
            )
            i += 1


async def drive(urls: list[str], run: str, clients: int, seconds: float, stats: Stats) -> float:
    started = time.monotonic()
    balancers = [Balancer(urls[n % len(urls) :] + urls[: n % len(urls)]) for n in range(clients)]
    await asyncio.gather(*(client(n, run, balancers[n], started + seconds, stats) for n in range(clients)))
    return time.monotonic() - started


# --- one run ---------------------------------------------------------------------------------------


def run_once(args: argparse.Namespace, processes: int, kill: bool, upstream: Upstream) -> dict:
    run = uuid.uuid4().hex[:8]
    tenant = f"scale-{run}"
    env = {k: v for k, v in os.environ.items() if k not in ("MEMSTACK_API_KEYS", "MEMSTACK_VECTORS")}
    subprocess.run(
        memstack_command("init", "--strategy", "window,retrieval", db=args.db, tenant=tenant, vectors=args.vectors),
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    model = f"vllm:stub@{upstream.url}"
    api = []
    for _ in range(processes):
        port = free_port()
        command = memstack_command(
            "serve",
            "--port",
            str(port),
            "--no-worker",
            "--model",
            model,
            "--log-level",
            "warning",
            db=args.db,
            tenant=tenant,
            vectors=args.vectors,
        )
        api.append(Process("api", subprocess.Popen(command, env=env), url=f"http://127.0.0.1:{port}"))
    workers = [
        Process(
            "worker",
            subprocess.Popen(
                memstack_command("worker", "--poll", "0.2", "--lease", str(args.lease), db=args.db, tenant=tenant, vectors=args.vectors),
                env=env,
                stdout=subprocess.DEVNULL,
            ),
        )
        for _ in range(args.workers)
    ]
    everyone = api + workers
    try:
        for p in api:
            wait_healthy(p)
        time.sleep(2)  # the workers load the embedder
        pg = {pid: cpu_seconds(pid) for pid in postgres_pids()}
        for p in everyone:
            p.cpu_at_start = cpu_seconds(p.popen.pid)
        milvus_at_start = cpu_seconds(args.milvus_pid) if getattr(args, "milvus_pid", None) else 0.0
        me_start = time.process_time()
        stats = Stats()
        if kill:
            threading.Timer(
                args.seconds / 2, lambda: [os.kill(p.popen.pid, signal.SIGKILL) or setattr(p, "killed", True) for p in (api[0], workers[0])]
            ).start()
        sampler = threading.Event()

        def sample() -> None:
            while not sampler.wait(1.0):
                for p in everyone:
                    p.sample()

        threading.Thread(target=sample, daemon=True).start()
        elapsed = asyncio.run(drive([p.url for p in api], run, args.clients, args.seconds, stats))
        sampler.set()
        for p in everyone:
            p.sample()
        me_cpu = time.process_time() - me_start
        pg_cpu = sum(cpu_seconds(pid) - pg.get(pid, 0.0) for pid in postgres_pids())
        milvus_cpu = cpu_seconds(args.milvus_pid) - milvus_at_start if getattr(args, "milvus_pid", None) else None
        drain_started = time.monotonic()
        drained = wait_drained(args.db, tenant, args.lease + args.drain, args.vectors)
        drain_seconds = time.monotonic() - drain_started
    finally:
        for p in everyone:
            if p.popen.poll() is None:
                p.popen.send_signal(signal.SIGTERM)
        for p in everyone:
            try:
                p.popen.wait(60)
            except subprocess.TimeoutExpired:
                p.popen.kill()
    audit = audit_store(args.db, tenant, stats, args.vectors)
    report = {
        "api_processes": processes,
        "workers": args.workers,
        "clients": args.clients,
        "seconds": round(elapsed, 1),
        "killed": "one API process and one worker at half time" if kill else None,
        "ops": {op: op_summary(stats.latency[op], elapsed) for op in OPS},
        "requests_per_second": round(sum(len(v) for v in stats.latency.values()) / elapsed, 1),
        "errors": dict(stats.errors),
        "retried_on_another_process": dict(stats.retried),
        "cpu_cores": {
            "api": [round(p.cpu / elapsed, 2) for p in api],
            "workers": [round(p.cpu / elapsed, 2) for p in workers],
            "postgresql": round(pg_cpu / elapsed, 2),
            "clients": round(me_cpu / elapsed, 2),
            **({"milvus": round(milvus_cpu / elapsed, 2)} if milvus_cpu is not None else {}),
        },
        "drained": drained,
        "drain_seconds": round(drain_seconds, 1),
        "audit": audit,
    }
    if not args.keep:
        with open_memory(args.db, tenant, args.vectors) as memory:
            for user in stats.chats:
                memory.forget(user_id=user)
    return report


def open_memory(db: str, tenant: str, vectors: str | None) -> Memory:
    return Memory(db, tenant=tenant, vectors=vectors) if vectors else Memory(db, tenant=tenant)


def wait_drained(db: str, tenant: str, timeout: float, vectors: str | None) -> bool:
    deadline = time.monotonic() + timeout
    with open_memory(db, tenant, vectors) as memory:
        while time.monotonic() < deadline:
            if memory.pending(tenant=tenant) == 0:
                return True
            time.sleep(1)
    return False


def audit_store(db: str, tenant: str, stats: Stats, vectors: str | None) -> dict:
    """What the store holds against what the clients were told."""
    lost = duplicated = extra = threads_differing = not_indexed = units_twice = 0
    with open_memory(db, tenant, vectors) as memory:
        pending = memory.pending(tenant=tenant)
        for user, texts in stats.acknowledged.items():
            held = Counter(m.text for m in memory.history(user_id=user, thread_id="rest"))
            told = Counter(texts)
            lost += sum(1 for t in told if held[t] == 0)
            duplicated += sum(held[t] - 1 for t in told if held[t] > 1)
            extra += sum(c for t, c in held.items() if t not in told)
        for user, view in stats.chats.items():
            stored = [(m.role, m.text) for m in visible(memory.history(user_id=user, thread_id="chat", order="append"))]
            # a question whose answer the client never received (its process was killed) may
            # be stored without its answer and resent: the client's view must be what is stored
            threads_differing += stored != view
        units = memory.store.units
        for user in stats.chats:
            for thread in ("rest", "chat"):
                scope = memory.scope(user, thread)
                ids = [m.id for m in memory.history(user_id=user, thread_id=thread) if m.role in ("user", "assistant")]
                covered: Counter = Counter()
                seen: Counter = Counter()
                for batch in units.iterate(scope):
                    for unit in batch:
                        if unit.scope.thread_id != thread:
                            continue
                        covered.update(unit.source_ids)
                        seen[(unit.kind, unit.round, unit.text)] += 1
                not_indexed += sum(1 for i in ids if covered[i] == 0)
                units_twice += sum(c - 1 for c in seen.values() if c > 1)
    return {
        "acknowledged_adds": sum(len(v) for v in stats.acknowledged.values()),
        "lost": lost,
        "duplicated": duplicated,
        "stored_not_acknowledged": extra,
        "chat_threads": len(stats.chats),
        "chat_threads_differing_from_client": threads_differing,
        "jobs_pending": pending,
        "messages_not_indexed": not_indexed,
        "units_indexed_twice": units_twice,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=os.environ.get("MEMSTACK_TEST_PG_DSN"), help="a PostgreSQL URL (default: $MEMSTACK_TEST_PG_DSN)")
    ap.add_argument("--processes", default="1,2,4", help="API process counts, one run each (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--kill", action="store_true", help="SIGKILL one API process and one worker half-way through the last run")
    ap.add_argument("--lease", type=float, default=10.0, help="the workers' job lease in seconds (default: %(default)s)")
    ap.add_argument("--drain", type=float, default=180.0, help="seconds to wait for the queue after the clients stop, beyond one lease")
    ap.add_argument("--vectors", help="a vector index outside the store, e.g. milvus://127.0.0.1:19530")
    ap.add_argument(
        "--milvus-server",
        metavar="DIR",
        help="start a Milvus standalone server with its data in DIR for the vectors (only in a private network namespace, see above)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the runs' users in the store")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.db or not args.db.startswith(("postgresql://", "postgres://")):
        raise SystemExit("--db must be a PostgreSQL URL (or set MEMSTACK_TEST_PG_DSN): several processes share one store")
    counts = [int(c) for c in args.processes.split(",")]
    if not 0 < args.clients <= 500 or not 0 < args.seconds <= 600 or not all(0 < c <= 16 for c in counts):
        raise SystemExit("--clients must be in 1..500, --seconds in (0, 600], process counts in 1..16")
    reports = []
    milvus = start_milvus(Path(args.milvus_server)) if args.milvus_server else None
    if milvus is not None:
        args.milvus_pid = milvus.server_proc.pid
        args.vectors = f"milvus://root:Milvus@127.0.0.1:19530?collection=scale_{uuid.uuid4().hex[:8]}&consistency=bounded"
    try:
        with Upstream() as upstream:
            for i, count in enumerate(counts):
                report = run_once(args, count, args.kill and i == len(counts) - 1, upstream)
                reports.append(report)
                if not args.json:
                    show(report)
    finally:
        if milvus is not None:
            milvus.server_proc.kill()
            milvus.server_proc.wait(30)
    if args.json:
        vectors = "milvus server" if milvus is not None else (args.vectors.split("://")[0] if args.vectors else "pgvector")
        print(json.dumps({"vectors": vectors, "runs": reports}, ensure_ascii=False))


def start_milvus(data_dir: Path):
    """The packaged Milvus standalone server, with authentication on; refused where any network
    interface but loopback exists (it listens on all of them)."""
    if [name for _, name in socket.if_nameindex()] != ["lo"]:
        raise SystemExit("--milvus-server runs only in a private network namespace: see the module docstring")
    from milvus import MilvusServer, MilvusServerConfig

    config = MilvusServerConfig(data_dir=str(data_dir))
    config.set("authorization_enabled", True)
    server = MilvusServer(config)
    server.listen_port = 19530
    server.start()
    return server


def show(r: dict) -> None:
    print(
        f"{r['api_processes']} API processes + {r['workers']} workers, {r['clients']} clients, {r['seconds']} s"
        + (f" ({r['killed']})" if r["killed"] else ""),
        flush=True,
    )
    for op, s in r["ops"].items():
        print(
            f"  {op:<8} {s['requests']:>7} requests  {s['per_second']:>7} /s   p50 {s['p50_ms']} ms  p95 {s['p95_ms']} ms  p99 {s['p99_ms']} ms"
        )
    print(
        f"  all: {r['requests_per_second']} requests/s; errors {sum(r['errors'].values())} {r['errors'] or ''}; retried on another process {r['retried_on_another_process'] or 0}"
    )
    print(
        f"  CPU cores used: API {r['cpu_cores']['api']}, workers {r['cpu_cores']['workers']}, PostgreSQL {r['cpu_cores']['postgresql']}, clients {r['cpu_cores']['clients']}"
        + (f", Milvus {r['cpu_cores']['milvus']}" if "milvus" in r["cpu_cores"] else "")
    )
    print(f"  queue drained: {r['drained']} in {r['drain_seconds']} s; audit: {r['audit']}", flush=True)


if __name__ == "__main__":
    main()
