"""``copy_store`` with the vectors in Chroma: from a SQLite store (vectors in the store) to another
store with its vectors in Chroma's embedded client, and (marker chroma_server, ``bash
scripts/chroma-tests.sh tests/test_transfer_chroma.py``) to a Chroma server, and back. Verify is
clean, the destination's profile names its Chroma collection, and the contexts are the same."""

from __future__ import annotations

import importlib
import os

import pytest
from transfer_support import EXTRACTION, LAYERS, context_texts, fill, open_memory

from memstack import Memory
from memstack.backends.sqlite import SQLiteStore
from memstack.testing import ScriptedModel
from memstack.transfer import copy_store
from memstack.transfer.copying import verify

try:
    importlib.import_module("chromadb")
except ImportError as exc:  # pragma: no cover - the chroma extra is not installed
    if os.environ.get("CI"):
        raise
    pytest.skip(f"chromadb is needed ({exc}); pip install 'memstack[chroma]'", allow_module_level=True)

from memstack.backends.chroma import ChromaVectorIndex  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    store = SQLiteStore(tmp_path_factory.mktemp("source") / "memstack.db")
    fill(store, users=("user_001",))
    yield store
    store.close()


def _copy_there_and_back(source, there, index, back):
    report = copy_store(source, there, tenant="acme", src_index=source.vectors, dst_index=index)
    assert report.differences == () and report.read["vector"] == report.read["unit"] > 0
    assert there.profiles.get("acme")["vectors"] == index.location == "chroma:copied"
    assert verify(source, there, tenant="acme", src_index=source.vectors, dst_index=index) == []
    there_memory = Memory(
        there,
        tenant="acme",
        vectors=index,
        layers=list(LAYERS),
        options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4, "buffer_tokens": 60},
    )
    assert context_texts(there_memory) == context_texts(open_memory(source))
    assert copy_store(there, back, tenant="acme", src_index=index, dst_index=back.vectors).differences == ()
    assert "vectors" not in back.profiles.get("acme")  # back in the store's own index
    assert context_texts(open_memory(back)) == context_texts(open_memory(source))
    assert verify(source, back, tenant="acme", src_index=source.vectors, dst_index=back.vectors) == []


def test_to_sqlite_with_embedded_chroma_and_back(source, tmp_path):
    index = ChromaVectorIndex(str(tmp_path / "chroma_db"), collection="copied")
    try:
        _copy_there_and_back(source, SQLiteStore(tmp_path / "there.db"), index, SQLiteStore(tmp_path / "back.db"))
    finally:
        index.close()


@pytest.mark.chroma_server
@pytest.mark.timeout(180)
def test_to_a_chroma_server_and_back(source, tmp_path, chroma_server):
    index = ChromaVectorIndex.from_url(f"{chroma_server.url}?collection=copied")
    try:
        _copy_there_and_back(source, SQLiteStore(tmp_path / "there.db"), index, SQLiteStore(tmp_path / "back.db"))
    finally:
        index.reset()
        index.close()
