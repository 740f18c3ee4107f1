"""The PostgreSQL record store and usage log pass their contracts, keep one current version per key
under concurrent writers and reach schemas made before them.

Needs a server: set MEMSTACK_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5433/postgres, as
printed by scripts/postgres.sh). Without it the module is skipped, except under CI, where a
missing server is a failure. Every test works in a fresh random schema, dropped afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pgsupport import drop_schema, require_dsn

from memstack.errors import InvalidInput
from memstack.testing import A, RecordStoreContract, UsageLogContract, msg
from memstack.testing.records import U, put, usage
from memstack.types import user_digest

DSN = require_dsn("record store")

psycopg = pytest.importorskip("psycopg")
from memstack.backends.postgres import PostgresStore, quote_identifier  # noqa: E402
from memstack.backends.rules.deletions import user_hash  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(DSN, schema=schema)
    yield store
    store.close()


class _Postgres:
    durable = True

    @pytest.fixture(autouse=True)
    def fresh_schema(self, schema: str) -> None:
        self.schema = schema

    def new_store(self) -> PostgresStore:
        return PostgresStore(DSN, schema=self.schema)

    def reopen(self, store: PostgresStore) -> PostgresStore:
        store.close()
        return PostgresStore(DSN, schema=self.schema)


class TestPostgresRecords(_Postgres, RecordStoreContract):
    pass


class TestPostgresUsage(_Postgres, UsageLogContract):
    pass


def test_text_postgresql_cannot_store_is_invalid_input_and_stores_nothing(pg: PostgresStore) -> None:
    with pytest.raises(InvalidInput):
        pg.records.apply(U, [put("good", {"v": 1}), put("bad", {"v": "nul \x00 byte"})], layer="l")
    with pytest.raises(InvalidInput):
        pg.records.apply(U, [put("good", {"v": 1}), put("nul \x00 key", {"v": 1})], layer="l")
    assert pg.records.current(U, "entity") == [] and pg.records.audit(U) == []


def test_concurrent_writers_of_one_key_take_turns(pg: PostgresStore) -> None:
    errors: list[Exception] = []

    def work(w: int) -> None:
        try:
            for i in range(20):
                pg.records.apply(U, [put("李四", {"writer": w, "i": i})], layer="l")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = pg.records.history(U, "entity", "李四")
    assert [r.version for r in versions] == list(range(1, 81))
    assert [r.current for r in versions].count(True) == 1


def test_the_deletion_key_is_the_stores_own(schema: str) -> None:
    """Two stores (schemas) hash one user id differently; one store, the same, whichever of its
    processes deleted the user."""
    other = f"{schema}_b"
    hashes = []
    try:
        for name in (schema, other):
            first, second = PostgresStore(DSN, schema=name), PostgresStore(DSN, schema=name)
            try:
                first.delete_user(A)
                second.delete_user(A)
                hashes.append([d.user_hash for d in first.deletions("default")])
            finally:
                first.close()
                second.close()
    finally:
        drop_schema(DSN, other)
    (one, again), (two, _) = hashes
    assert one == again != two and user_digest("user_001") not in (one, two)


def test_the_notes_of_a_schema_from_before_the_key_are_rehashed(schema: str) -> None:
    """A note written as a bare sha256 (before 0008_deletion_key) is rehashed under the new key:
    no unsalted digest is left, and the user hashes as in a note written afterwards."""
    PostgresStore(DSN, schema=schema).close()
    with psycopg.connect(DSN, autocommit=True) as conn:  # back to the schema before the key
        conn.execute(f"SET search_path = {quote_identifier(schema)}")
        conn.execute("DROP TABLE memstack_deletion_key")
        conn.execute("DELETE FROM memstack_migrations WHERE name = '0008_deletion_key'")
        conn.execute(
            "INSERT INTO memstack_deletions (tenant, user_hash, at, rows_deleted) VALUES ('default', %s, now(), 4)",
            (user_digest("user_001"),),
        )
    store = PostgresStore(DSN, schema=schema)
    try:
        store.delete_user(A)
        old, new = (d.user_hash for d in store.deletions("default"))
        with psycopg.connect(DSN) as conn:
            (secret,) = conn.execute(f"SELECT secret FROM {quote_identifier(schema)}.memstack_deletion_key").fetchone()
        assert old == new == user_hash(bytes(secret), "default", "user_001") != user_digest("user_001")
    finally:
        store.close()


def test_the_notes_of_a_schema_from_before_0009_read_as_users_of_unknown_counts(schema: str) -> None:
    """Before 0009_deletion_notes a note was a user's, with its rows only: it reads back as a user's
    deletion by an unknown layer, found among that user's notes, beside the new ones."""
    PostgresStore(DSN, schema=schema).close()
    secret = b"k" * 32
    with psycopg.connect(DSN, autocommit=True) as conn:  # back to the schema before 0009
        conn.execute(f"SET search_path = {quote_identifier(schema)}")
        conn.execute("DROP INDEX memstack_deletions_user")
        conn.execute("ALTER TABLE memstack_deletions DROP COLUMN kind, DROP COLUMN target_hash, DROP COLUMN counts, DROP COLUMN layer")
        conn.execute("DELETE FROM memstack_migrations WHERE name = '0009_deletion_notes'")
        conn.execute("INSERT INTO memstack_deletion_key (id, secret) VALUES (1, %s)", (secret,))
        conn.execute(
            "INSERT INTO memstack_deletions (tenant, user_hash, at, rows_deleted) VALUES ('default', %s, now(), 4)",
            (user_hash(secret, "default", "user_001"),),
        )
    store = PostgresStore(DSN, schema=schema)
    try:
        store.history.append(A, [msg("user", "你好")])
        store.history.delete_thread(A, layer="ui")
        old, new = store.deletions("default", user_id="user_001")
        assert (old.kind, old.rows, old.counts, old.layer, old.target_hash) == ("user", 4, {}, None, None)
        assert (new.kind, new.counts, new.layer) == ("thread", {"messages": 1}, "ui")
    finally:
        store.close()


def test_a_schema_from_before_records_gains_them(schema: str) -> None:
    store = PostgresStore(DSN, schema=schema)
    store.close()
    with psycopg.connect(DSN, autocommit=True) as conn:  # back to the schema before records
        conn.execute(f"SET search_path = {quote_identifier(schema)}")
        for table in ("memstack_records", "memstack_record_audit", "memstack_model_usage", "memstack_deletions"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM memstack_migrations WHERE name = ANY(%s)", (["0004_records", "0005_deletions", "0009_deletion_notes"],))
    store = PostgresStore(DSN, schema=schema)
    try:
        store.records.apply(U, [put("李四", {"v": 1})], layer="l")
        store.usage.record([usage(A, 0)])
        assert store.delete_user(A) == 3
        assert [d.rows for d in store.deletions("default")] == [3]
    finally:
        store.close()
