"""Backups: ``memstack backup`` of SQLite (online, while another process writes) and JSON lines, the
refusals, and a ``pg_dump``/``pg_restore`` of a populated PostgreSQL schema read back record by
record (the commands docs/backups.md shows)."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sqlite3
import subprocess
import uuid
from glob import glob

import pytest
from upgrade_support import ALICE_T1, dump, populate, postgres_counts

from memstack.backends import open_store
from memstack.backup import backup
from memstack.cli import main
from memstack.errors import NotFound, UsageError
from memstack.types import Message, Scope

T = Scope(user_id="writer", thread_id="w1")
PAIRS = 400


def _write_pairs(path: str, started) -> None:
    """Append PAIRS pairs of messages to T, each pair in one transaction (a user line and its answer)."""
    store = open_store(f"sqlite:///{path}")
    try:
        for i in range(PAIRS):
            store.history.append(T, [Message("user", f"问题 {i}", id=f"q-{i}"), Message("assistant", f"answer {i}", id=f"a-{i}")])
            if i == 20:
                started.set()
    finally:
        store.close()


def _check_prefix(path) -> int:
    """The backup at ``path`` passes integrity_check, opens as a store, and holds whole pairs 0..k-1."""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = open_store(f"sqlite:///{path}")
    try:
        ids = [m.id for m in store.history.read(T)]
    finally:
        store.close()
    pairs = len(ids) // 2
    assert ids == [x for i in range(pairs) for x in (f"q-{i}", f"a-{i}")]  # a prefix, no half pair
    return pairs


def test_a_sqlite_backup_taken_while_another_process_writes_is_a_consistent_prefix(tmp_path):
    path = tmp_path / "live.db"
    open_store(f"sqlite:///{path}").close()
    ctx = multiprocessing.get_context("spawn")
    started = ctx.Event()
    writer = ctx.Process(target=_write_pairs, args=(str(path), started))
    writer.start()
    try:
        assert started.wait(30)
        seen = []
        for n in range(3):
            done = backup(f"sqlite:///{path}", tmp_path / f"b{n}.db")
            assert done.kind == "sqlite" and done.bytes > 0
            seen.append(_check_prefix(tmp_path / f"b{n}.db"))
    finally:
        writer.join(60)
    assert writer.exitcode == 0
    assert 20 < seen[0] <= seen[1] <= seen[2] <= PAIRS
    assert _check_prefix(path) == PAIRS  # the store itself lost nothing
    assert not glob(str(tmp_path / ".*partial*"))


def test_the_backup_command_copies_the_default_store_and_refuses_to_overwrite(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    monkeypatch.setenv("MEMSTACK_HOME", str(home))
    assert main(["add", "--user", "u", "--thread", "t", "--role", "user", "北京的咖啡"]) == 0
    capsys.readouterr()
    target = tmp_path / "backups" / "copy.db"  # its directory is made

    assert main(["--json", "backup", str(target)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "sqlite" and out["backup"] == str(target) and out["bytes"] == target.stat().st_size
    store = open_store(f"sqlite:///{target}")
    assert [m.content for m in store.history.read(Scope(user_id="u", thread_id="t"))] == ["北京的咖啡"]
    store.close()

    before = target.read_bytes()
    assert main(["backup", str(target)]) == 2
    assert "exists" in capsys.readouterr().err
    assert target.read_bytes() == before
    assert main(["backup", "--overwrite", str(target)]) == 0


def test_a_backup_does_not_migrate_or_create_the_source(tmp_path):
    with pytest.raises(NotFound):
        backup(f"sqlite:///{tmp_path / 'none.db'}", tmp_path / "b.db")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "b.db").exists()
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:  # a store of the first schema: 001_core only
        db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        db.execute("INSERT INTO _migrations VALUES ('001_core', '2026-11-29T00:00:00+00:00')")
    backup(str(old), tmp_path / "b.db")
    with sqlite3.connect(old) as db:
        assert db.execute("SELECT name FROM _migrations").fetchall() == [("001_core",)]


@pytest.mark.parametrize("url", ["postgresql://user@db.example/memstack", "memory://", "sqlite:///:memory:"])
def test_stores_memstack_does_not_back_up_are_refused_with_what_to_do(tmp_path, url):
    with pytest.raises(UsageError) as info:
        backup(url, tmp_path / "b")
    assert "docs/backups.md" in str(info.value)
    if url.startswith("postgresql"):
        assert "pg_dump" in str(info.value)
    assert not (tmp_path / "b").exists()


def test_a_jsonl_store_is_copied_under_its_lock(tmp_path):
    root = tmp_path / "j"
    store = open_store(f"jsonl://{root}")
    store.history.append(T, [Message("user", "你好", id="m-1"), Message("assistant", "hi", id="m-2")])
    done = backup(f"jsonl://{root}", tmp_path / "copy")
    assert done.kind == "jsonl"
    assert not (tmp_path / "copy" / ".lock").exists()
    copy = open_store(f"jsonl://{tmp_path / 'copy'}")
    assert copy.history.read(T) == store.history.read(T)


# ---- PostgreSQL: pg_dump and pg_restore, as docs/backups.md shows ------------------------------------


def _pg_tool(name: str) -> str:
    found = shutil.which(name) or (sorted(glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def _with_database(dsn: str, database: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "dbname": database})


@pytest.mark.parametrize(
    ("form", "where"),
    [("custom", "own schema"), ("plain", "own schema"), ("custom", "public")],
)
def test_a_pg_dump_of_a_memstack_schema_restores_into_a_fresh_database_with_every_record(form, where, tmp_path):
    """The commands of docs/backups.md: a store in a schema of its own (the library's
    ``PostgresStore(dsn, schema=...)``) dumped with ``--schema`` and restored whole, or one in
    ``public`` (the command line's) restored with ``pg_restore --schema=public`` into a database
    whose ``public`` exists already; both into a fresh database with the vector extension."""
    import psycopg
    from pgsupport import drop_schema, require_dsn

    from memstack.backends.postgres import PostgresStore

    dsn = require_dsn("backup")
    created = []

    def fresh_database() -> str:
        name = f"memstack_restore_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        with psycopg.connect(_with_database(dsn, name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")  # pg_dump --schema leaves extensions out
        return _with_database(dsn, name)

    schema = "public" if where == "public" else f"memstack_test_{uuid.uuid4().hex[:12]}"
    source = fresh_database() if where == "public" else dsn
    try:
        store = PostgresStore(source, schema=schema)
        populate(store)
        store.close()
        file = tmp_path / "memstack.dump"
        subprocess.run(
            [_pg_tool("pg_dump"), f"--format={form}", f"--schema={schema}", "--no-owner", f"--file={file}", source],
            check=True,
            timeout=60,
        )
        restored_dsn = fresh_database()
        if form == "plain":
            restore = [_pg_tool("psql"), "--quiet", "--no-psqlrc", "--set=ON_ERROR_STOP=1", f"--file={file}", restored_dsn]
        else:
            only = ["--schema=public"] if where == "public" else []  # public exists: restore what is in it
            restore = [_pg_tool("pg_restore"), "--no-owner", "--exit-on-error", *only, f"--dbname={restored_dsn}", str(file)]
        subprocess.run(restore, check=True, timeout=60, capture_output=True)

        original = PostgresStore(source, schema=schema)
        copy = PostgresStore(restored_dsn, schema=schema)
        try:
            want = json.loads(json.dumps(dump(original, postgres_counts(source, schema)), ensure_ascii=False))
            got = json.loads(json.dumps(dump(copy, postgres_counts(restored_dsn, schema)), ensure_ascii=False))
            assert sorted(got) == sorted(want)
            for part in want:  # one part at a time, so that a failure names what differs
                assert got[part] == want[part], part
            (stored,) = copy.history.append(ALICE_T1, [Message("user", "after the restore", id="m-restored")])
            assert stored.seq > max(m.seq for m in original.history.read(ALICE_T1))  # the sequences came along
        finally:
            original.close()
            copy.close()
    finally:
        if where != "public":
            drop_schema(dsn, schema)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
