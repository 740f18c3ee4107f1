"""A store made by an earlier memstack opens with this one and keeps every row.

The fixtures (``tests/fixtures/upgrade``, made by ``make.py`` there) are a SQLite file and a
``pg_dump`` of a PostgreSQL schema, each filled with every kind of row by
``upgrade_support.populate``, and what ``upgrade_support.dump`` read back from them with the code
that made them. Opening a copy with today's code (which applies the migrations it lacks, none for
a store of the same release) must read back the same: every message, record version, audit
event, unit, vector, note, checkpoint (LangGraph's too) and job, and the same row count in every
table. Then the store takes a new write.

The first schema's fixtures (``first_*``, made by ``make.py --first`` with the first release's
own code) are upgraded through every later migration and checked row by row and through the API;
a store holding a migration this code does not know (a newer release's) is refused with
SchemaError and left byte for byte (SQLite) or row for row (PostgreSQL) as it was; two processes
opening a first-schema store at once migrate it once.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest
from pgsupport import drop_schema, require_dsn
from upgrade_support import ALICE_T1, at, dump, postgres_counts, sqlite_counts

from memstack.backends import open_store
from memstack.errors import SchemaError
from memstack.types import Message, Scope

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


# ---- the first schema: stores written by the first release, upgraded to today's ------------------
#
# first_sqlite.db and first_postgres.sql were written by the first release's own code (make.py
# --first runs first_release.py under commit FIRST_COMMIT: 001_core / 0001_initial only), and
# first_*.json hold what that code read back through its API and every row of every table.
# Opening them with today's code applies every later migration; each row must still be there,
# column for column, and today's API must read back what the first release did.

sys.path.insert(0, str(FIXTURES))  # first_release.py, for its row readers
from first_release import THREADS as FIRST_THREADS  # noqa: E402
from first_release import postgres_rows, sqlite_rows  # noqa: E402


def first(name: str) -> dict:
    return json.loads((FIXTURES / f"first_{name}.json").read_text(encoding="utf-8"))


def columns_of(rows: dict) -> dict:
    return {table: part["columns"] for table, part in rows.items()}


def contains(old, new, where: str = "") -> None:
    """``new`` holds everything ``old`` does (a later release's values may carry more fields)."""
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        for key, value in old.items():
            assert key in new, f"{where}/{key}"
            contains(value, new[key], f"{where}/{key}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            contains(a, b, f"{where}[{i}]")
    else:
        assert old == new, where


def read_like_the_first_release(store) -> dict:
    from first_release import USERS, plain

    def scope(key):
        user_id, thread_id, tenant, agent_id = key
        return Scope(user_id=user_id, thread_id=thread_id, tenant=tenant, agent_id=agent_id)

    name = "/".join
    return {
        "messages": {name(str(p) for p in k): plain(store.history.read(scope(k))) for k in FIRST_THREADS},
        "threads": {name(str(p) for p in k): plain(store.history.threads(scope(k))) for k in USERS},
        "state": {name(str(p) for p in k): store.state.get(scope(k)) for k in FIRST_THREADS},
        "user-notes": store.state.get(scope(USERS[0]), name="user-notes"),
        "checkpoints": {name(str(p) for p in k): plain(store.checkpoints.list(scope(k))) for k in FIRST_THREADS},
        "pending": {name(str(p) for p in k): store.jobs.pending(scope(k)) for k in USERS},
    }


def keeps_every_later_kind(store) -> None:
    """The tables later migrations made work on the upgraded store: units and their keyword
    index, vectors, records with their audit, usage, profiles, deletion notes."""
    from upgrade_support import ALICE, MODEL, vector

    from memstack.types import Change, Unit, UsageRecord

    unit = Unit("u-new", ALICE_T1, "升级之后：杭州的龙井茶", at(70), "round", 9, None, ("m-1",))
    store.units.put([unit])
    store.vectors.upsert([unit], [vector(7)], model=MODEL)
    store.records.apply(ALICE, [Change("put", "entity", "Alice", {"name": "Alice"}, ("m-1",))], layer="entities")
    store.usage.record([UsageRecord(ALICE_T1, "summary", "scripted", 10, 2, 1.0, at=at(71))])
    store.profiles.put("default", {"layers": ["window"]})
    store.note_deletion(ALICE_T1, "note", {"units": 0}, layer="test", name="none")
    assert [h.id for h in store.units.keyword_search(ALICE, "龙井茶", k=3)] == ["u-new"]
    assert [h.id for h in store.vectors.search(ALICE, vector(7), k=1)] == ["u-new"]
    assert [r.key for r in store.records.current(ALICE, "entity")] == ["Alice"]
    assert [u.layer for u in store.usage.read(ALICE)] == ["summary"]
    assert store.profiles.get("default") is not None
    assert len(store.deletions("default", user_id="alice")) == 1


def migrated_as_today(names: list[str], dialect: str) -> None:
    if dialect == "sqlite":
        from memstack.backends.sqlite.migrations import MIGRATIONS
    else:
        from memstack.backends.postgres.migrations import MIGRATIONS
    assert names == [name for name, _ in MIGRATIONS]  # every one, once, in order


def first_sqlite_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "first.db"
    shutil.copyfile(FIXTURES / "first_sqlite.db", copy)
    return copy


def test_a_sqlite_file_of_the_first_schema_upgrades_with_every_row(tmp_path):
    want = first("sqlite")
    assert want["migrations"] == ["001_core"]
    copy = first_sqlite_copy(tmp_path)
    store = open_store(f"sqlite:///{copy}")
    try:
        migrated_as_today([r[0] for r in store.query("SELECT name FROM _migrations ORDER BY rowid")], "sqlite")
        with sqlite3.connect(copy) as db:
            assert sqlite_rows(db, columns_of(want["rows"])) == want["rows"]
        contains(want["api"], json.loads(json.dumps(read_like_the_first_release(store), ensure_ascii=False)), "api")
        takes_a_write(store)
        keeps_every_later_kind(store)
    finally:
        store.close()


def restore(dsn: str, file: str, fixture_schema: str) -> str:
    """``file`` (a pg_dump of ``fixture_schema``) restored into a fresh schema; its name."""
    import psycopg

    name = f"memstack_test_{uuid.uuid4().hex[:12]}"
    script = (FIXTURES / file).read_text(encoding="utf-8").replace(fixture_schema, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute(script)
    return name


@pytest.fixture
def first_schema():
    """first_postgres.sql restored into a fresh schema (dropped afterwards)."""
    dsn = require_dsn("upgrade")
    name = restore(dsn, "first_postgres.sql", "memstack_first_fixture")
    yield dsn, name
    drop_schema(dsn, name)


def pg_rows(dsn: str, schema: str, columns=None) -> dict:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return postgres_rows(conn, schema, columns)


def pg_migrations(dsn: str, schema: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return [r[0] for r in conn.execute(f'SELECT name FROM "{schema}".memstack_migrations ORDER BY applied_at, name')]


def test_a_postgres_schema_of_the_first_schema_upgrades_with_every_row(first_schema):
    from memstack.backends.postgres import PostgresStore

    dsn, schema = first_schema
    want = first("postgres")
    assert want["migrations"] == ["0001_initial"]
    store = PostgresStore(dsn, schema=schema)
    try:
        migrated_as_today(sorted(pg_migrations(dsn, schema)), "postgres")
        assert pg_rows(dsn, schema, columns_of(want["rows"])) == want["rows"]
        contains(want["api"], json.loads(json.dumps(read_like_the_first_release(store), ensure_ascii=False)), "api")
        takes_a_write(store)
        keeps_every_later_kind(store)
    finally:
        store.close()


# ---- a store of a newer release: refused, nothing changed --------------------------------------------


def test_a_sqlite_file_of_a_newer_release_is_refused_and_left_as_it_was(tmp_path):
    copy = first_sqlite_copy(tmp_path)  # 001_core, and a migration this code does not know
    with sqlite3.connect(copy) as db:
        db.execute("INSERT INTO _migrations VALUES ('099_from_the_future', '2030-01-01T00:00:00+00:00')")
    db.close()
    before = copy.read_bytes()

    with pytest.raises(SchemaError) as info:
        open_store(f"sqlite:///{copy}")
    assert "099_from_the_future" in str(info.value) and "newer memstack" in str(info.value)
    with sqlite3.connect(copy) as db:  # none of the migrations it lacks was applied
        assert [r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY rowid")] == ["001_core", "099_from_the_future"]
        assert sqlite_rows(db) == first("sqlite")["rows"]
    db.close()
    assert copy.read_bytes() == before


def test_a_postgres_schema_of_a_newer_release_is_refused_and_left_as_it_was(first_schema):
    import psycopg

    from memstack.backends.postgres import PostgresStore

    dsn, schema = first_schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'INSERT INTO "{schema}".memstack_migrations (name) VALUES (%s)', ("9999_from_the_future",))
        tables = f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' ORDER BY tablename"
        before = conn.execute(tables).fetchall()

    with pytest.raises(SchemaError) as info:
        PostgresStore(dsn, schema=schema)
    assert "9999_from_the_future" in str(info.value) and "newer memstack" in str(info.value)
    assert sorted(pg_migrations(dsn, schema)) == ["0001_initial", "9999_from_the_future"]
    assert pg_rows(dsn, schema) == first("postgres")["rows"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute(tables).fetchall() == before


# ---- two processes opening an old store at once migrate it once ------------------------------------


def _open_at_once(url: str, schema: str | None, barrier) -> None:
    from memstack.backends.postgres import PostgresStore

    barrier.wait(30)
    store = PostgresStore(url, schema=schema) if schema else open_store(url)
    store.close()


def open_in_two_processes(url: str, schema: str | None = None) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_open_at_once, args=(url, schema, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]


def test_two_processes_opening_a_first_schema_sqlite_file_migrate_it_once(tmp_path):
    copy = first_sqlite_copy(tmp_path)
    open_in_two_processes(f"sqlite:///{copy}")
    want = first("sqlite")
    with sqlite3.connect(copy) as db:
        migrated_as_today([r[0] for r in db.execute("SELECT name FROM _migrations ORDER BY rowid")], "sqlite")
        assert sqlite_rows(db, columns_of(want["rows"])) == want["rows"]
    db.close()


def test_two_processes_opening_a_first_schema_postgres_schema_migrate_it_once(first_schema):
    dsn, schema = first_schema
    open_in_two_processes(dsn, schema)
    migrated_as_today(sorted(pg_migrations(dsn, schema)), "postgres")
    want = first("postgres")
    assert pg_rows(dsn, schema, columns_of(want["rows"])) == want["rows"]
