"""The PostgreSQL backend passes the store contract, migrates safely and fails fast and clearly.

Needs a server: set MEMSTACK_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5433/postgres, as
printed by scripts/postgres.sh). Without it the module is skipped, except under CI, where a
missing server is a failure. Every test works in a fresh random schema, dropped afterwards.
"""

from __future__ import annotations

import math
import multiprocessing
import sys
import time
from collections.abc import Iterator

import pytest
from pgsupport import require_dsn

from memstack.errors import InvalidInput, MissingDependency, SchemaError, StoreError
from memstack.testing import A, StoreContract, msg
from memstack.types import Message

DSN = require_dsn("backend")

psycopg = pytest.importorskip("psycopg")
from memstack.backends.postgres import MIGRATIONS, PostgresStore, quote_identifier  # noqa: E402

pytestmark = pytest.mark.postgres

PROCESSES, PER_PROCESS = 4, 50


def drop_schema(schema: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(schema)} CASCADE")


def append_one_by_one(dsn: str, schema: str, writer: int) -> None:
    """A separate process's work for the multi-process test (module level, so 'spawn' can import it)."""
    store = PostgresStore(dsn, schema=schema, max_size=2)
    try:
        for i in range(PER_PROCESS):
            store.history.append(A, [msg("user", f"p{writer}-{i}")], enqueue=["probe"])
    finally:
        store.close()


@pytest.fixture
def pg(schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(DSN, schema=schema)
    yield store
    store.close()


class TestPostgresStore(StoreContract):
    durable = True

    @pytest.fixture(autouse=True)
    def fresh_schema(self, schema: str) -> None:
        self.schema = schema

    def new_store(self) -> PostgresStore:
        return PostgresStore(DSN, schema=self.schema)

    def reopen(self, store: PostgresStore) -> PostgresStore:
        store.close()
        return PostgresStore(DSN, schema=self.schema)


def applied(schema: str) -> list[str]:
    with psycopg.connect(DSN) as conn:
        rows = conn.execute(f"SELECT name FROM {quote_identifier(schema)}.memstack_migrations ORDER BY name").fetchall()
    return [name for (name,) in rows]


def test_migrations_are_idempotent(schema: str) -> None:
    first = PostgresStore(DSN, schema=schema)
    first.history.append(A, [msg("user", "kept")])
    first.close()
    second = PostgresStore(DSN, schema=schema)
    try:
        assert [m.text for m in second.history.read(A)] == ["kept"]
    finally:
        second.close()
    assert applied(schema) == [name for name, _ in MIGRATIONS]


def test_unknown_newer_migration_raises_schema_error(pg: PostgresStore, schema: str) -> None:
    pg.close()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {quote_identifier(schema)}.memstack_migrations (name) VALUES ('9999_from_the_future')")
    with pytest.raises(SchemaError, match="9999_from_the_future"):
        PostgresStore(DSN, schema=schema)


def test_unreachable_server_raises_store_error_fast() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError, match="connecting"):
        PostgresStore("postgresql://postgres@127.0.0.1:1/postgres", connect_timeout=2)
    assert time.monotonic() - started < 5


def test_postgres_scheme_url_works(schema: str) -> None:
    url = DSN.replace("postgresql://", "postgres://", 1)
    assert url.startswith("postgres://")
    store = PostgresStore(url, schema=schema)
    try:
        store.history.append(A, [msg("user", "hi")])
        assert [m.text for m in store.history.read(A)] == ["hi"]
    finally:
        store.close()


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependency, match=r'pip install "memstack\[postgres\]"'):
        PostgresStore(DSN)


def test_unstorable_values_are_invalid_input_and_store_nothing(pg: PostgresStore) -> None:
    with pytest.raises(InvalidInput):
        pg.history.append(A, [msg("user", "fine"), Message(role="user", content="nul \x00 byte")], enqueue=["probe"])
    assert pg.history.read(A) == [] and pg.jobs.pending() == 0
    with pytest.raises(InvalidInput):
        pg.state.put(A, {"x": math.nan})
    assert pg.state.get(A) is None


def test_closed_store_raises_store_error(pg: PostgresStore) -> None:
    pg.close()
    with pytest.raises(StoreError):
        pg.history.read(A)


def test_separate_processes_lose_nothing_and_keep_order(pg: PostgresStore, schema: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=append_one_by_one, args=(DSN, schema, w)) for w in range(PROCESSES)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
    assert [p.exitcode for p in workers] == [0] * PROCESSES
    got = pg.history.read(A)
    assert len(got) == PROCESSES * PER_PROCESS
    assert [m.seq for m in got] == sorted({m.seq for m in got})
    for w in range(PROCESSES):
        assert [m.text for m in got if m.text.startswith(f"p{w}-")] == [f"p{w}-{i}" for i in range(PER_PROCESS)]
    job = pg.jobs.claim(worker="w")
    assert job is not None and job.version == PROCESSES * PER_PROCESS
