"""Copy rate and peak memory of ``memstack copy`` from SQLite to PostgreSQL, by store size.

Builds a SQLite store of ``--messages`` plain messages (Chinese and English text, spread over
``--users`` users and ``--threads`` threads each), then runs ``memstack copy sqlite:///... DSN`` as
a child process into a fresh PostgreSQL database (created and dropped here) and reports the
messages copied per second (the copy's wall time, its closing verify included) and the child's
peak resident memory (``ru_maxrss`` of the children).

    .venv/bin/python bench/copy_rate.py --messages 100000 --dsn postgresql://postgres@127.0.0.1:5433/postgres
    .venv/bin/python bench/copy_rate.py --messages 1000000 --users 1000 --json

Memory is bounded by the largest thread and the batch (``--batch``), not the store: grow
``--users`` with ``--messages`` to keep threads the same length.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memstack.backends.sqlite import SQLiteStore  # noqa: E402
from memstack.types import Message, Scope  # noqa: E402

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
TEXTS = ("我下周三要给老板汇报知识中台的进度，预算是30万元。", "The backend uses SpringBoot; search moves to Milvus next sprint.")


def build(path: Path, *, messages: int, users: int, threads: int) -> None:
    """A SQLite store of ``messages`` messages, appended in batches of 1,000 per thread."""
    store = SQLiteStore(path)
    per_thread = max(1, messages // (users * threads))
    made = 0
    try:
        for u in range(users):
            for t in range(threads):
                scope = Scope(user_id=f"user_{u:05d}", thread_id=f"t{t}", tenant="bench")
                for start in range(0, per_thread, 1000):
                    n = min(1000, per_thread - start, messages - made)
                    if n <= 0:
                        return
                    batch = [
                        Message(
                            role="user" if i % 2 == 0 else "assistant",
                            content=f"{TEXTS[i % 2]} #{start + i}",
                            timestamp=T0 + timedelta(seconds=start + i),
                        )
                        for i in range(n)
                    ]
                    store.history.append(scope, batch)
                    made += n
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--threads", type=int, default=5)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--dsn", default=os.environ.get("MEMSTACK_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5433/postgres"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import psycopg

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source.db"
        started = time.perf_counter()
        build(source, messages=args.messages, users=args.users, threads=args.threads)
        built = time.perf_counter() - started
        database = f"memstack_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {database}")
        target = urlunsplit(urlsplit(args.dsn)._replace(path=f"/{database}"))
        try:
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            command = [
                sys.executable,
                "-m",
                "memstack",
                "--tenant",
                "bench",
                "copy",
                f"sqlite:///{source}",
                target,
                "--batch",
                str(args.batch),
            ]
            started = time.perf_counter()
            proc = subprocess.run(command, capture_output=True, text=True, env=env)
            seconds = time.perf_counter() - started
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
            peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {database}")
    result = {
        "messages": args.messages,
        "users": args.users,
        "threads_per_user": args.threads,
        "batch": args.batch,
        "build_seconds": round(built, 1),
        "copy_seconds": round(seconds, 1),
        "messages_per_second": round(args.messages / seconds),
        "peak_rss_mib": round(peak_mib, 1),
        "last_line": proc.stdout.strip().splitlines()[-1],
    }
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(
            f"SQLite -> PostgreSQL, {args.messages:,} messages ({args.users} users x {args.threads} threads), batch {args.batch}: "
            f"{result['copy_seconds']} s (verify included), {result['messages_per_second']:,} messages/s, peak RSS {result['peak_rss_mib']} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
