"""Filtered top-10 vector search latency for one big user among many: SQLite default, pgvector.

Generates unit-normalised float32 vectors with topic structure (d=384 by default): ``--per-user``
for one big user and users of ``--others-size`` vectors up to ``--total``, interleaved in insertion
order as real traffic would be. Loads them into memstack's SQLite store (through
``vectors.upsert``) and into PostgreSQL (binary COPY, then the HNSW index is built), then runs
``--queries`` filtered top-10 searches for the big user, cycling through four filters: none, one
category (1/8 of the user's rows), the last 90 days (~1/4) and three threads (3/100). Reports p50
and p95 latency and recall@10 against exact search done in the same script (numpy brute force
for SQLite, the exact SQL path for PostgreSQL). ``--sqlite-vec`` also measures the alternative
the SQLite design rejected (sqlite-vec through pysqlite3).

    python bench/vector_latency.py --pg-dsn postgresql://postgres@127.0.0.1:5433/postgres --json
    python bench/vector_latency.py --total 200000 --per-user 50000   # smaller
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memstack.backends.sqlite import SQLiteStore  # noqa: E402
from memstack.types import Scope, Scored, SearchFilter, Unit  # noqa: E402

END = datetime(2025, 1, 1, tzinfo=timezone.utc)
BIG = "user_big"
KINDS = ("round", "fact", "summary")
CATEGORIES = tuple(f"c{i}" for i in range(8))
MODEL = "bench-e5-small"
PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
WARM_UP = 20  # queries run before measuring, not measured


@dataclass
class Data:
    """Every vector with its metadata, in insertion order."""

    vectors: np.ndarray  # (n, d) float32, length 1
    users: np.ndarray  # user index: 0 is the big user
    threads: np.ndarray  # thread number within the user
    kinds: np.ndarray
    categories: np.ndarray
    days_ago: np.ndarray  # float days before END

    def unit(self, i: int) -> Unit:
        user = BIG if self.users[i] == 0 else f"user_{self.users[i]:06d}"
        scope = Scope(user_id=user, thread_id=f"t{self.threads[i]:03d}")
        return Unit(
            id=f"u{i:07d}",
            scope=scope,
            text="x",
            timestamp=END - timedelta(days=float(self.days_ago[i])),
            kind=KINDS[self.kinds[i]],
            category=CATEGORIES[self.categories[i]],
        )


def generate(total: int, per_user: int, others_size: int, dim: int, n_queries: int, seed: int) -> tuple[Data, np.ndarray]:
    """Vectors and queries from one model of text embeddings: 256 topics in a 32-dimensional latent
    space, projected to ``dim`` dimensions, plus isotropic noise, scaled to length 1. A query's
    10th-nearest neighbour lies at cosine ~0.77 and its 100th at ~0.70 (at 100k vectors)."""
    rng = np.random.default_rng(seed)
    latent_dim = 32
    topics = rng.standard_normal((256, latent_dim)).astype(np.float32)
    projection = rng.standard_normal((latent_dim, dim)).astype(np.float32) / np.sqrt(latent_dim)

    def sample(n: int) -> np.ndarray:
        latent = topics[rng.integers(0, 256, n)] + 0.6 * rng.standard_normal((n, latent_dim), dtype=np.float32)
        out = np.empty((n, dim), np.float32)
        for start in range(0, n, 100_000):
            end = min(n, start + 100_000)
            out[start:end] = latent[start:end] @ projection + 0.35 * rng.standard_normal((end - start, dim), dtype=np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    vectors = sample(total)
    owner = np.concatenate([np.zeros(per_user, np.int64), 1 + np.arange(total - per_user) // others_size])
    blocks = rng.permutation(np.arange(total) // 100)  # bursts of 100 rows of one user, interleaved
    owner = owner[np.argsort(blocks * total + np.arange(total), kind="stable")]
    data = Data(
        vectors=vectors,
        users=owner,
        threads=np.where(owner == 0, rng.integers(0, 100, total), rng.integers(0, 10, total)),
        kinds=rng.integers(0, len(KINDS), total),
        categories=rng.integers(0, len(CATEGORIES), total),
        days_ago=rng.uniform(0, 365, total),
    )
    return data, sample(n_queries)


def filters() -> list[tuple[str, SearchFilter | None]]:
    return [
        ("none", None),
        ("category", SearchFilter(categories=("c3",))),
        ("last 90 days", SearchFilter(since=END - timedelta(days=90))),
        ("3 threads", SearchFilter(thread_ids=("t007", "t042", "t099"))),
    ]


def exact_top(data: Data, big: np.ndarray, query: np.ndarray, where: SearchFilter | None, k: int = 10) -> list[str]:
    """numpy brute force over the big user's rows that match ``where``."""
    rows = big
    if where is not None:
        if where.categories:
            rows = rows[np.isin(data.categories[rows], [CATEGORIES.index(c) for c in where.categories])]
        if where.since is not None:
            rows = rows[data.days_ago[rows] <= (END - where.since).total_seconds() / 86400]
        if where.thread_ids:
            rows = rows[np.isin(data.threads[rows], [int(t[1:]) for t in where.thread_ids])]
    cos = data.vectors[rows] @ query
    best = np.lexsort((rows, -cos))[:k]
    return [f"u{i:07d}" for i in rows[best]]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_queries(search: Callable[[np.ndarray, SearchFilter | None], list[str]], qs: np.ndarray) -> tuple[list[float], list[list[str]]]:
    kinds = filters()
    times, results = [], []
    for n, q in enumerate(qs):
        started = time.perf_counter()
        results.append(search(q, kinds[n % len(kinds)][1]))
        times.append((time.perf_counter() - started) * 1000)
    return times, results


def summary(times: list[float], results: list[list[str]], truth: list[list[str]]) -> dict[str, Any]:
    names = [name for name, _ in filters()]
    out: dict[str, Any] = {"p50_ms": round(statistics.median(times), 2), "p95_ms": round(percentile(times, 95), 2)}
    out["recall_at_10"] = round(sum(len(set(r) & set(t)) for r, t in zip(results, truth, strict=True)) / sum(len(t) for t in truth), 4)
    out["by_filter"] = {
        name: {
            "p50_ms": round(statistics.median(times[i :: len(names)]), 2),
            "p95_ms": round(percentile(times[i :: len(names)], 95), 2),
            "recall_at_10": round(
                sum(len(set(r) & set(t)) for r, t in zip(results[i :: len(names)], truth[i :: len(names)], strict=True))
                / max(1, sum(len(t) for t in truth[i :: len(names)])),
                4,
            ),
        }
        for i, name in enumerate(names)
    }
    return out


def ids_of(found: list[Scored]) -> list[str]:
    return [s.id for s in found]


# ---- SQLite (memstack's default) ----------------------------------------------------------------


def load_sqlite(data: Data, path: Path, batch: int = 20_000) -> float:
    store = SQLiteStore(path, synchronous="OFF")
    started = time.perf_counter()
    for start in range(0, len(data.vectors), batch):
        end = min(start + batch, len(data.vectors))
        store.vectors.upsert([data.unit(i) for i in range(start, end)], data.vectors[start:end], model=MODEL)
    store.close()
    return time.perf_counter() - started


def bench_sqlite(path: Path, qs: np.ndarray, warm: np.ndarray, truth: list[list[str]]) -> dict[str, Any]:
    store = SQLiteStore(path)
    scope = Scope(user_id=BIG)
    started = time.perf_counter()
    store.vectors.search(scope, warm[0], k=10)
    first = time.perf_counter() - started
    for q in warm[1:]:
        store.vectors.search(scope, q, k=10)
    times, results = run_queries(lambda q, w: ids_of(store.vectors.search(scope, q, k=10, where=w)), qs)
    cached = store.vectors._cache._entries[("default", BIG)][1].nbytes
    store.close()
    return {"first_search_s": round(first, 2), "cached_user_mb": round(cached / 2**20, 1), **summary(times, results, truth)}


# ---- sqlite-vec (the rejected alternative) ------------------------------------------------------


def connect_sqlite_vec(path: Path) -> Any:
    import pysqlite3
    import sqlite_vec

    db = pysqlite3.connect(str(path), isolation_level=None)
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.execute("PRAGMA journal_mode = WAL")
    return db


def load_sqlite_vec(data: Data, path: Path, batch: int = 20_000) -> float:
    db = connect_sqlite_vec(path)
    d = data.vectors.shape[1]
    db.execute(
        f"""CREATE VIRTUAL TABLE vec USING vec0(user_key TEXT PARTITION KEY, embedding FLOAT[{d}] distance_metric=cosine,
            thread_id TEXT, kind TEXT, category TEXT, ts INTEGER, +unit_id TEXT)"""
    )
    started = time.perf_counter()
    for start in range(0, len(data.vectors), batch):
        rows = []
        for i in range(start, min(start + batch, len(data.vectors))):
            u = data.unit(i)
            rows.append(
                (
                    "default\x1f" + u.scope.user_id,
                    data.vectors[i].tobytes(),
                    u.scope.thread_id,
                    u.kind,
                    u.category,
                    int(u.timestamp.timestamp()),
                    u.id,
                )
            )
        db.execute("BEGIN")
        db.executemany("INSERT INTO vec (user_key, embedding, thread_id, kind, category, ts, unit_id) VALUES (?,?,?,?,?,?,?)", rows)
        db.execute("COMMIT")
    db.close()
    return time.perf_counter() - started


def bench_sqlite_vec(path: Path, qs: np.ndarray, truth: list[list[str]]) -> dict[str, Any]:
    db = connect_sqlite_vec(path)

    def search(q: np.ndarray, where: SearchFilter | None) -> list[str]:
        sql, params = "SELECT unit_id FROM vec WHERE embedding MATCH ? AND k = 10 AND user_key = ?", [q.tobytes(), "default\x1f" + BIG]
        if where is not None and where.categories:
            sql += f" AND category IN ({','.join('?' * len(where.categories))})"
            params += list(where.categories)
        if where is not None and where.thread_ids:
            sql += f" AND thread_id IN ({','.join('?' * len(where.thread_ids))})"
            params += list(where.thread_ids)
        if where is not None and where.since is not None:
            sql += " AND ts >= ?"
            params.append(int(where.since.timestamp()))
        return [r[0] for r in db.execute(sql + " ORDER BY distance", params)]

    times, results = run_queries(search, qs)
    db.close()
    return summary(times, results, truth)


# ---- PostgreSQL ---------------------------------------------------------------------------------


def copy_rows(data: Data, ids: Iterator[int]) -> Iterator[bytes]:
    """PostgreSQL binary COPY rows for memstack_vectors (pgvector's binary form for vectors)."""
    d = data.vectors.shape[1]
    head = struct.pack("!h", 9)
    vector_head = struct.pack("!ihh", 4 + 4 * d, d, 0)

    def text(value: str) -> bytes:
        raw = value.encode()
        return struct.pack("!i", len(raw)) + raw

    for i in ids:
        u = data.unit(i)
        ts = (u.timestamp - PG_EPOCH) // timedelta(microseconds=1)
        yield b"".join(
            (
                head,
                *(text(v) for v in (u.scope.tenant, u.scope.user_id, "", u.scope.thread_id or "", u.id, u.kind, u.category or "")),
                struct.pack("!iq", 8, ts),
                vector_head,
                data.vectors[i].astype(">f4").tobytes(),
            )
        )


def load_pg(data: Data, dsn: str, schema: str) -> tuple[Any, dict[str, float]]:
    import psycopg

    from memstack.backends.postgres import PostgresStore, quote_identifier
    from memstack.backends.postgres.database import extension_schema

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(schema)} CASCADE")
    store = PostgresStore(dsn, schema=schema, max_size=2)
    store.vectors.upsert([data.unit(0)], data.vectors[:1], model=MODEL)  # fixes vector(d) and makes the HNSW index
    timings: dict[str, float] = {}
    with store._db.pool.connection() as conn:
        conn.execute("DROP INDEX memstack_vectors_hnsw")
        conn.execute("TRUNCATE memstack_vectors")
        started = time.perf_counter()
        with (
            conn.cursor() as cur,
            cur.copy(
                "COPY memstack_vectors (tenant, user_id, agent_id, thread_id, unit_id, kind, category, ts, embedding) FROM STDIN (FORMAT BINARY)"
            ) as copy,
        ):
            copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0))
            rows = copy_rows(data, iter(range(len(data.vectors))))
            while chunk := b"".join(row for _, row in zip(range(5000), rows, strict=False)):
                copy.write(chunk)
            copy.write(struct.pack("!h", -1))
        timings["copy_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        ext = extension_schema(conn.cursor())
        conn.execute(f"CREATE INDEX memstack_vectors_hnsw ON memstack_vectors USING hnsw (embedding {ext}.vector_cosine_ops)")
        timings["hnsw_build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE memstack_vectors")
        timings["vacuum_analyze_s"] = time.perf_counter() - started
        timings["shared_buffers_mb"] = conn.execute(
            "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]
        sizes = "SELECT sum({}(relid)) / 2^20 FROM pg_partition_tree('{}')"  # summed over the partitions
        timings["index_mb"] = conn.execute(sizes.format("pg_relation_size", "memstack_vectors_hnsw")).fetchone()[0]
        timings["table_mb"] = conn.execute(sizes.format("pg_table_size", "memstack_vectors")).fetchone()[0]
    return store, {k: round(float(v), 1) for k, v in timings.items()}


def bench_pg(store: Any, data: Data, qs: np.ndarray, warm: np.ndarray, truth: list[list[str]]) -> dict[str, Any]:
    from memstack.backends.postgres.vectors import PgVectorIndex

    exact, hnsw = PgVectorIndex(store._db, exact_below=10**9), PgVectorIndex(store._db, exact_below=0)
    out: dict[str, Any] = {}
    for label, user, n in (("big_user", BIG, len(qs)), ("small_user", "user_000001", len(qs) // 4)):
        scope, some = Scope(user_id=user), qs[:n]
        for q in warm:
            exact.search(scope, q, k=10)
            hnsw.search(scope, q, k=10)
        exact_times, exact_results = run_queries(lambda q, w, scope=scope: ids_of(exact.search(scope, q, k=10, where=w)), some)
        hnsw_times, hnsw_results = run_queries(lambda q, w, scope=scope: ids_of(hnsw.search(scope, q, k=10, where=w)), some)
        times, results = run_queries(lambda q, w, scope=scope: ids_of(store.vectors.search(scope, q, k=10, where=w)), some)
        out[label] = {
            "rows": int((data.users == (0 if user == BIG else 1)).sum()),
            "default": summary(times, results, exact_results),
            "exact_sql": summary(exact_times, exact_results, truth if user == BIG else exact_results),
            "hnsw_always": summary(hnsw_times, hnsw_results, exact_results),
        }
    return out


# ---- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=1_000_000, help="vectors in the store, all users (default 1,000,000)")
    parser.add_argument("--per-user", type=int, default=100_000, help="vectors of the big user that is searched (default 100,000)")
    parser.add_argument("--others-size", type=int, default=1000, help="vectors of each other user (default 1,000)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-dsn", help="PostgreSQL with pgvector; left out: PostgreSQL is skipped")
    parser.add_argument("--pg-schema", default="memstack_bench_vectors", help="dropped and recreated")
    parser.add_argument(
        "--engines",
        default="sqlite,postgres",
        help="comma-separated: sqlite, sqlite-vec (needs pysqlite3 and sqlite-vec), postgres (needs --pg-dsn)",
    )
    parser.add_argument("--workdir", type=Path, help="where the SQLite files go (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memstack-vector-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k not in ("pg_dsn", "workdir", "json")}}
    started = time.perf_counter()
    data, all_queries = generate(args.total, args.per_user, args.others_size, args.dim, args.queries + WARM_UP, args.seed)
    qs, warm = all_queries[: args.queries], all_queries[args.queries :]
    big = np.flatnonzero(data.users == 0)
    kinds = filters()
    truth = [exact_top(data, big, q, kinds[n % len(kinds)][1]) for n, q in enumerate(qs)]
    report["generate_s"] = round(time.perf_counter() - started, 1)
    engines = set(args.engines.split(","))
    if "postgres" in engines:
        if not args.pg_dsn:
            parser.error("--engines postgres needs --pg-dsn")
        import memstack.backends.postgres  # noqa: F401  (fail now rather than after the SQLite runs)

    def log(*parts: Any) -> None:
        print(*parts, file=sys.stderr if args.json else sys.stdout, flush=True)

    if "sqlite" in engines:
        path = workdir / "memstack.db"
        path.unlink(missing_ok=True)
        report["sqlite"] = {"load_s": round(load_sqlite(data, path), 1)}
        report["sqlite"].update(bench_sqlite(path, qs, warm, truth))
        report["sqlite"]["file_mb"] = round(path.stat().st_size / 2**20)
        log("sqlite", report["sqlite"])
        path.unlink()
    if "sqlite-vec" in engines:
        vec_path = workdir / "sqlite-vec.db"
        vec_path.unlink(missing_ok=True)
        report["sqlite_vec"] = {"load_s": round(load_sqlite_vec(data, vec_path), 1), **bench_sqlite_vec(vec_path, qs, truth)}
        report["sqlite_vec"]["file_mb"] = round(vec_path.stat().st_size / 2**20)
        log("sqlite-vec", report["sqlite_vec"])
        vec_path.unlink()
    if "postgres" in engines:
        store, timings = load_pg(data, args.pg_dsn, args.pg_schema)
        report["postgres"] = {**timings, **bench_pg(store, data, qs, warm, truth)}
        store.close()
        log("postgres", report["postgres"])
    report["total_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2) if args.json else f"done in {report['total_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
