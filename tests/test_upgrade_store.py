"""A store made by an earlier memstack opens with this one and keeps every row.

The fixtures (``tests/fixtures/upgrade``, made by ``make.py`` there) are a SQLite file and a
``pg_dump`` of a PostgreSQL schema, each filled with every kind of row by
``upgrade_support.populate``, and what ``upgrade_support.dump`` read back from them with the code
that made them. Opening a copy with today's code (which applies the migrations it lacks, none for
a store of the same release) must read back the same: every message, record version, audit
event, unit, vector, note, checkpoint (LangGraph's too) and job, and the same row count in every
table. Then the store takes a new write.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from pgsupport import drop_schema, require_dsn
from upgrade_support import ALICE_T1, at, dump, postgres_counts, sqlite_counts

from memstack.backends import open_store
from memstack.types import Message

FIXTURES = Path(__file__).parent / "fixtures" / "upgrade"
FIXTURE_SCHEMA = "memstack_upgrade_fixture"


def expected(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def same_as_fixture(got: dict, want: dict) -> None:
    got = json.loads(json.dumps(got, ensure_ascii=False))
    assert sorted(got) == sorted(want)
    for part in want:  # one part at a time, so that a failure names what changed
        assert got[part] == want[part], part


def takes_a_write(store) -> None:
    before = store.history.read(ALICE_T1)
    (stored,) = store.history.append(ALICE_T1, [Message("user", "after the upgrade", id="m-new", timestamp=at(60))])
    assert stored.seq > max(m.seq for m in before)
    assert [m.id for m in store.history.read(ALICE_T1)] == [m.id for m in before] + ["m-new"]


def test_a_sqlite_file_of_the_earlier_release_keeps_every_row(tmp_path):
    copy = tmp_path / "memstack.db"
    shutil.copyfile(FIXTURES / "sqlite.db", copy)
    store = open_store(f"sqlite:///{copy}")

    try:
        same_as_fixture(dump(store, sqlite_counts(store)), expected("sqlite"))
        takes_a_write(store)
    finally:
        store.close()


@pytest.fixture
def restored_schema():
    """The PostgreSQL fixture restored into a fresh schema (dropped afterwards)."""
    import psycopg

    dsn = require_dsn("upgrade")
    name = f"memstack_test_{uuid.uuid4().hex[:12]}"
    script = (FIXTURES / "postgres.sql").read_text(encoding="utf-8").replace(FIXTURE_SCHEMA, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        ext = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        if ext != "public":
            script = script.replace("public.vector", f"{ext}.vector")
        conn.execute(script)
    yield dsn, name
    drop_schema(dsn, name)


def test_a_postgres_schema_of_the_earlier_release_keeps_every_row(restored_schema):
    from memstack.backends.postgres import PostgresStore

    dsn, schema = restored_schema

    store = PostgresStore(dsn, schema=schema)
    try:
        same_as_fixture(dump(store, postgres_counts(dsn, schema)), expected("postgres"))
        takes_a_write(store)
    finally:
        store.close()
