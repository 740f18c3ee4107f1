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
