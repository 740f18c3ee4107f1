"""``milvus://`` URLs: a Milvus server or a milvus-lite file, and the index's collection.

    milvus://127.0.0.1:19530                 a server (the port defaults to 19530)
    milvus://user:password@host:19530/db     with a token (user:password) and a database
    milvus://:API_KEY@host:443?secure=true   a token without a user (Zilliz Cloud), over TLS
    milvus:///abs/path/vectors.db            a milvus-lite file (one process per file)

Query options: ``collection`` (the index's name, default ``memstack_units``), ``timeout``
(seconds per call, default 10), ``secure`` (TLS), ``index`` (the vector index type, FLAT: exact),
``consistency`` of reads (``strong``, the default: every vector written before is seen, at the
cost of waiting for the server's next time tick, 200 ms by default; ``bounded``, ``session``,
``eventually``: no wait, but vectors written by another process in the last seconds may be missed).
User name and password are percent-decoded; ``redacted`` gives the URL without them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ...errors import InvalidInput
from ..rules import index_urls
from ..rules.index_urls import query_options, secure_option, split, timeout_option
from .collections import check_name

DEFAULT_PORT = 19530
DEFAULT_COLLECTION = "memstack_units"
DEFAULT_TIMEOUT = 10.0
OPTIONS = ("collection", "timeout", "secure", "index", "consistency")
CONSISTENCY = {"strong": "Strong", "session": "Session", "bounded": "Bounded", "eventually": "Eventually"}
FORMS = "milvus://HOST:PORT (a server) or milvus:///ABSOLUTE/PATH.db (a milvus-lite file)"


def _bad(url: str, why: str) -> InvalidInput:
    return InvalidInput(f"vectors URL {redacted(url)!r}: {why}; use {FORMS}", field="vectors")


def parse(url: str) -> dict[str, Any]:
    """The ``MilvusVectorIndex`` arguments a ``milvus://`` URL names: uri, token, db_name,
    collection, timeout, index_type, consistency. InvalidInput (field ``vectors``) for anything else."""
    parts, port = split(url, "milvus", _bad)
    options = query_options(url, parts.query, OPTIONS, _bad)
    timeout = timeout_option(url, options, DEFAULT_TIMEOUT, _bad)
    secure = secure_option(url, options, _bad)
    consistency = options.get("consistency", "strong").lower()
    if consistency not in CONSISTENCY:
        raise _bad(url, f"consistency must be one of {', '.join(CONSISTENCY)}")
    found: dict[str, Any] = {
        "consistency": CONSISTENCY[consistency],
        "collection": check_name(options.get("collection", DEFAULT_COLLECTION)),
        "timeout": timeout,
        "index_type": options.get("index", "FLAT").upper(),
    }
    if not parts.netloc:  # milvus:///abs/file.db
        if not parts.path.startswith("/") or parts.path.endswith("/") or len(parts.path) < 2:
            raise _bad(url, "a milvus-lite file needs an absolute path")
        if secure:
            raise _bad(url, "secure applies to a server, not a milvus-lite file")
        return {**found, "uri": unquote(parts.path), "token": None, "db_name": ""}
    if not parts.hostname:
        raise _bad(url, "no host")
    if port is None and parts.hostname.endswith(".db") and not parts.path:
        raise _bad(url, f"{parts.hostname!r} reads as a host; a milvus-lite file needs an absolute path (milvus:///abs/{parts.hostname})")
    db = parts.path.strip("/")
    if "/" in db:
        raise _bad(url, "the path is a database name, one segment")
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = f"{user}:{password}" if user and password else (password or user or None)
    scheme = "https" if secure else "http"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return {**found, "uri": f"{scheme}://{host}:{port or DEFAULT_PORT}", "token": token, "db_name": unquote(db)}


def redacted(url: str) -> str:
    """The URL with any user name and password replaced by ``***`` (for messages and logs)."""
    return index_urls.redacted(url, "milvus")
