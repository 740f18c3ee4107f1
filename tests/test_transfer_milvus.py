"""``copy_store`` with the vectors in Milvus: from a SQLite store (vectors in the store) to another
store with its vectors in a milvus-lite file, to PostgreSQL + milvus-lite, and (marker
milvus_server, ``bash scripts/milvus-tests.sh tests/test_transfer_milvus.py``) to a Milvus server
and back. Verify is clean, the destination's profile names its Milvus collection, and the
contexts are the same."""

from __future__ import annotations

import importlib
import os
import uuid

import pytest
from transfer_support import EXTRACTION, LAYERS, context_texts, fill, open_memory

from memstack import Memory
from memstack.backends.sqlite import SQLiteStore
from memstack.testing import ScriptedModel
from memstack.transfer import copy_store
from memstack.transfer.copying import verify

try:
    importlib.import_module("pymilvus")
    importlib.import_module("milvus_lite")
except ImportError as exc:  # pragma: no cover - the milvus extra is not installed
    if os.environ.get("CI"):
        raise
    pytest.skip(f"pymilvus and milvus-lite are needed ({exc}); pip install 'memstack[milvus]'", allow_module_level=True)

from memstack.backends.milvus import MilvusVectorIndex  # noqa: E402


def _with_index(store, index) -> Memory:
    return Memory(
        store,
        tenant="acme",
        vectors=index,
        layers=list(LAYERS),
        options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4, "buffer_tokens": 60},
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    store = SQLiteStore(tmp_path_factory.mktemp("source") / "memstack.db")
    fill(store, users=("user_001",))
    yield store
    store.close()


def _copy_there_and_back(source, there, index, back):
    report = copy_store(source, there, tenant="acme", src_index=source.vectors, dst_index=index)
    assert report.differences == () and report.read["vector"] == report.read["unit"] > 0
    assert there.profiles.get("acme")["vectors"] == index.location
    assert verify(source, there, tenant="acme", src_index=source.vectors, dst_index=index) == []
    shown, expected = context_texts(_with_index(there, index)), context_texts(open_memory(source))
    assert shown == expected
    assert copy_store(there, back, tenant="acme", src_index=index, dst_index=back.vectors).differences == ()
    assert "vectors" not in back.profiles.get("acme")  # back in the store's own index
    assert context_texts(open_memory(back)) == context_texts(open_memory(source))
    assert verify(source, back, tenant="acme", src_index=source.vectors, dst_index=back.vectors) == []


def test_to_sqlite_with_milvus_lite_and_back(source, tmp_path):
    index = MilvusVectorIndex(str(tmp_path / "vectors.db"), collection="copied")
    try:
        _copy_there_and_back(source, SQLiteStore(tmp_path / "there.db"), index, SQLiteStore(tmp_path / "back.db"))
    finally:
        index.close()


@pytest.mark.postgres
def test_to_postgres_with_milvus_lite_and_back(source, tmp_path):
    from pgsupport import drop_schema, require_dsn

    from memstack.backends.postgres import PostgresStore

    dsn, schema = require_dsn("transfer"), f"memstack_test_{uuid.uuid4().hex[:12]}"
    there = PostgresStore(dsn, schema=schema, max_size=2)
    index = MilvusVectorIndex(str(tmp_path / "vectors.db"), collection="copied")
    try:
        _copy_there_and_back(source, there, index, SQLiteStore(tmp_path / "back.db"))
    finally:
        index.close()
        there.close()
        drop_schema(dsn, schema)


@pytest.mark.milvus_server
@pytest.mark.timeout(300)
def test_to_a_milvus_server_and_back(source, tmp_path, milvus_server):
    index = MilvusVectorIndex.from_url(f"{milvus_server.url}?collection=copied")
    try:
        _copy_there_and_back(source, SQLiteStore(tmp_path / "there.db"), index, SQLiteStore(tmp_path / "back.db"))
    finally:
        index.close()


@pytest.mark.milvus_server
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_sqlite_to_postgres_and_a_milvus_server_killed_midway_then_back(source, tmp_path, milvus_server):
    """The issue's path as a user runs it: ``memstack copy`` of a SQLite file with every kind of
    record to PostgreSQL with its vectors on a Milvus server, killed with SIGKILL mid-way and run
    again (resumed, verify clean, nothing doubled), then back to a SQLite file. (PostgreSQL is
    reached through its Unix socket inside the private network namespace: scripts/milvus-tests.sh.)"""
    import fcntl
    import signal
    import sqlite3
    import subprocess
    import sys
    from urllib.parse import urlsplit, urlunsplit

    import psycopg
    from pgsupport import require_dsn

    from memstack.backends.postgres import PostgresStore
    from memstack.types import Message, Scope

    src_path = tmp_path / "source.db"
    with sqlite3.connect(source.path) as live, sqlite3.connect(src_path) as copied:  # the module's store, WAL included
        live.backup(copied)
    extra = SQLiteStore(src_path)  # plenty of plain messages, so that the copy is still running when killed
    extra.history.append(
        Scope(user_id="user_001", thread_id="long", tenant="acme"),
        [Message(role="user", content=f"第{i}条消息：知识中台的进度") for i in range(1500)],
    )
    extra.close()
    dsn, database = require_dsn("transfer"), f"memstack_copy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    pg = urlunsplit(urlsplit(dsn)._replace(path=f"/{database}"))
    vectors = f"{milvus_server.url}?collection=moved"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}

    def memstack(*args, check=0):
        proc = subprocess.run([sys.executable, "-m", "memstack", *args], capture_output=True, text=True, env=env, timeout=240)
        assert proc.returncode == check, proc.stderr
        return proc.stdout

    try:
        read_end, write_end = os.pipe()
        fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)  # progress blocks until read
        command = [sys.executable, "-m", "memstack", "copy", f"sqlite:///{src_path}", pg, "--to-vectors", vectors, "--batch", "10"]
        proc = subprocess.Popen(command, stderr=write_end, text=True, env=env)
        os.close(write_end)
        with os.fdopen(read_end, encoding="utf-8") as progress:
            lines = [progress.readline() for _ in range(30)]
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL and all(line.startswith("copied ") for line in lines), lines
        out = memstack("copy", f"sqlite:///{src_path}", pg, "--to-vectors", vectors)
        assert "resumed" in out and "verify: clean" in out, out
        assert memstack("verify", f"sqlite:///{src_path}", pg, "--to-vectors", vectors).strip() == "verify: clean"

        back = tmp_path / "back.db"
        out = memstack("copy", pg, f"sqlite:///{back}", "--vectors", vectors)
        assert "verify: clean" in out, out
        there, index, home, returned = PostgresStore(pg), MilvusVectorIndex.from_url(vectors), SQLiteStore(src_path), SQLiteStore(back)
        try:
            assert there.profiles.get("acme")["vectors"] == index.location
            assert context_texts(_with_index(there, index)) == context_texts(open_memory(home))
            assert context_texts(open_memory(returned)) == context_texts(open_memory(home))
            long = Scope(user_id="user_001", thread_id="long", tenant="acme")
            assert [m.id for m in returned.history.read(long)] == [m.id for m in home.history.read(long)]  # once each, in order
            assert verify(home, returned, tenant="acme", src_index=home.vectors, dst_index=returned.vectors) == []
        finally:
            for opened in (there, index, home, returned):
                opened.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
