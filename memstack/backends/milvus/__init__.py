"""Vectors in Milvus: a server (``milvus://host:19530``) or a milvus-lite file (``milvus:///abs/file.db``).

    url.py           the ``milvus://`` URL: server or file, token, database, collection, options
    expressions.py   boolean expressions from quoted values (no value can change a filter)
                     (their terms, the rows and the contract's steps: ``rules.index_rows``, ``rules.indexes``)
    collections.py   the collections memstack owns: generations behind an alias, foreign ones refused
    index.py         MilvusVectorIndex: the VectorIndex contract, and stage/switch for a reindex

``pip install "memstack[milvus]"`` (pymilvus and milvus-lite); pymilvus is imported when an index
opens, so ``import memstack`` never needs it.
"""

from __future__ import annotations

from .expressions import quote, search_expression
from .index import REINDEX, MilvusVectorIndex
from .url import DEFAULT_COLLECTION, parse, redacted

__all__ = ["DEFAULT_COLLECTION", "REINDEX", "MilvusVectorIndex", "parse", "quote", "redacted", "search_expression"]
