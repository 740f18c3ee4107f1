"""Vectors in Chroma: its embedded client on a folder (``chroma:///abs/dir``) or a server (``chroma://host:8000``).

    url.py           the ``chroma://`` URL: a folder or a server, the collection, options
    filters.py       Chroma ``where`` filters built as data (no value can change one)
                     (their terms, the rows and the contract's steps: ``rules.index_rows``, ``rules.indexes``)
    collections.py   the collections memstack owns: a pointer, generations, one part per tenant
    index.py         ChromaVectorIndex: the VectorIndex contract, and stage/switch for a reindex

``pip install "memstack[chroma]"`` (chromadb, which also provides ``chroma run``); chromadb is
imported when an index opens, so ``import memstack`` never needs it.
"""

from __future__ import annotations

from .filters import search_where
from .index import REINDEX, ChromaVectorIndex
from .url import DEFAULT_COLLECTION, parse

__all__ = ["DEFAULT_COLLECTION", "REINDEX", "ChromaVectorIndex", "parse", "search_where"]
