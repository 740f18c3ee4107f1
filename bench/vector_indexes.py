"""Filtered top-10 query latency of memstack's vector indexes, one user of 100k vectors, in one run.

Compares, through the same ``VectorIndex.search`` memstack's retrieval layers call: the SQLite
store's own index (the default), Chroma's embedded client (``chroma:///DIR``), a Chroma server
(``chroma run``, ``chroma://127.0.0.1:PORT``), milvus-lite (``milvus:///FILE.db``) and a Milvus
2.3 standalone server (``milvus://...``, ``consistency=bounded``: a strong read waits for the
server's next time tick). The data and the query mix are bench/vector_latency.py's: unit-length
vectors with topic structure (d=384), one big user (``--per-user``) among users of
``--others-size`` vectors, four filters in turn (none, one category of 8, the last 90 days, three
threads of 100). Reports load time, the first search, p50/p95 and recall@10 against numpy brute
force over the big user's matching rows.

The servers listen on loopback only here, but the Milvus wheel listens on every interface, so
the run goes into a private network namespace where only loopback exists (no root needed)::

    unshare --net --map-root-user --pid --fork --mount-proc --kill-child \\
        sh -c 'ip link set lo up && exec .venv/bin/python bench/vector_indexes.py'
    .venv/bin/python bench/vector_indexes.py --engines sqlite,chroma,milvus   # no server: anywhere
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vector_latency import BIG, MODEL, WARM_UP, Data, exact_top, filters, generate, run_queries, summary  # noqa: E402

from memstack.stores import VectorIndex  # noqa: E402
from memstack.types import Scope  # noqa: E402

ENGINES = ("sqlite", "chroma", "chroma-server", "milvus", "milvus-server")
CHROMA_PORT = 18123
MILVUS_PORT = 19530
BATCH = 5000


def private_network() -> bool:
    return [name for _, name in socket.if_nameindex()] == ["lo"]


# ---- the servers ----------------------------------------------------------------------------


def start_chroma(data_dir: Path) -> subprocess.Popen[bytes]:
    import httpx

    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(data_dir), "--host", "127.0.0.1", "--port", str(CHROMA_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{CHROMA_PORT}/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("chroma run did not answer in 30 s")


def start_milvus(data_dir: Path) -> Any:
    """The packaged Milvus 2.3 standalone server with its default settings and authentication on."""
    from milvus import MilvusServer, MilvusServerConfig

    config = MilvusServerConfig(data_dir=str(data_dir))
    config.set("authorization_enabled", True)
    server = MilvusServer(config)
    server.listen_port = MILVUS_PORT
    server.start()  # waits for /healthz
    return server


def stop_milvus(server: Any) -> None:
    proc = server.server_proc
    if proc is not None and proc.poll() is None:
        proc.kill()  # it ignores SIGTERM for a while; the data is this run's
        proc.wait(30)


# ---- one engine -----------------------------------------------------------------------------


def open_index(engine: str, workdir: Path) -> VectorIndex:
    if engine == "sqlite":
        from memstack.backends.sqlite import SQLiteStore

        return SQLiteStore(workdir / "memstack.db", synchronous="OFF").vectors
    from memstack.backends import open_vectors

    url = {
        "chroma": f"chroma://{workdir / 'chroma'}?collection=bench",
        "chroma-server": f"chroma://127.0.0.1:{CHROMA_PORT}?collection=bench&timeout=120",
        "milvus": f"milvus://{workdir / 'milvus-lite.db'}?collection=bench&consistency=bounded&timeout=120",
        "milvus-server": f"milvus://root:Milvus@127.0.0.1:{MILVUS_PORT}?collection=bench&consistency=bounded&timeout=120",
    }[engine]
    index = open_vectors(url)
    assert index is not None
    return index


def load(index: VectorIndex, data: Data) -> float:
    started = time.perf_counter()
    for start in range(0, len(data.vectors), BATCH):
        end = min(start + BATCH, len(data.vectors))
        index.upsert([data.unit(i) for i in range(start, end)], data.vectors[start:end], model=MODEL)
    return time.perf_counter() - started


def bench(index: VectorIndex, qs: np.ndarray, warm: np.ndarray, truth: list[list[str]]) -> dict[str, Any]:
    scope = Scope(user_id=BIG)
    started = time.perf_counter()
    index.search(scope, warm[0], k=10)
    first = time.perf_counter() - started
    for q in warm[1:]:
        index.search(scope, q, k=10)
    search: Callable[[np.ndarray, Any], list[str]] = lambda q, w: [s.id for s in index.search(scope, q, k=10, where=w)]  # noqa: E731
    times, results = run_queries(search, qs)
    return {"first_search_s": round(first, 2), **summary(times, results, truth)}


def run_engine(engine: str, data: Data, qs: np.ndarray, warm: np.ndarray, truth: list[list[str]], workdir: Path) -> dict[str, Any]:
    server: Any = None
    if engine == "chroma-server":
        server = start_chroma(workdir / "chroma-server")
    elif engine == "milvus-server":
        server = start_milvus(workdir / "milvus-server")
    try:
        index = open_index(engine, workdir)
        out = {"load_s": round(load(index, data), 1)}
        out.update(bench(index, qs, warm, truth))
        getattr(index, "close", lambda: None)()
        return out
    finally:
        if isinstance(server, subprocess.Popen):
            server.kill()
            server.wait(30)
        elif server is not None:
            stop_milvus(server)


def table(report: dict[str, Any]) -> str:
    rows = ["| index | load s | first search s | p50 ms | p95 ms | recall@10 |", "|---|---|---|---|---|---|"]
    for engine in ENGINES:
        if engine in report:
            r = report[engine]
            rows.append(f"| {engine} | {r['load_s']} | {r['first_search_s']} | {r['p50_ms']} | {r['p95_ms']} | {r['recall_at_10']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-user", type=int, default=100_000, help="vectors of the user that is searched (default 100,000)")
    parser.add_argument("--total", type=int, default=120_000, help="vectors in the index, all users (default 120,000)")
    parser.add_argument("--others-size", type=int, default=1000, help="vectors of each other user (default 1,000)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)} (default: all)")
    parser.add_argument("--workdir", type=Path, help="where the files go (default: a temporary folder, removed)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engine {unknown[0]!r}; the engines are {', '.join(ENGINES)}")
    if any(e.endswith("-server") for e in engines) and not private_network():
        parser.error("the server engines run only in a private network namespace: see the module docstring")

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memstack-index-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k not in ("workdir", "json")}}
    started = time.perf_counter()
    data, all_queries = generate(args.total, args.per_user, args.others_size, args.dim, args.queries + WARM_UP, args.seed)
    qs, warm = all_queries[: args.queries], all_queries[args.queries :]
    big = np.flatnonzero(data.users == 0)
    kinds = filters()
    truth = [exact_top(data, big, q, kinds[n % len(kinds)][1]) for n, q in enumerate(qs)]
    report["generate_s"] = round(time.perf_counter() - started, 1)
    for engine in engines:
        report[engine] = run_engine(engine, data, qs, warm, truth, workdir)
        print(engine, json.dumps(report[engine]), file=sys.stderr, flush=True)
    report["total_s"] = round(time.perf_counter() - started, 1)
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report, indent=2) if args.json else table(report) + f"\n\ndone in {report['total_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
