"""``chroma://`` URLs: Chroma's embedded client on a folder, or a Chroma server, and the index's name.

    chroma:///abs/path/chroma_db             the embedded client (chromadb.PersistentClient) on a
                                             folder; one process per folder
    chroma://127.0.0.1:8000                  a server (``chroma run --path DIR --port 8000``, which
                                             ``pip install chromadb`` provides); the port defaults to 8000
    chroma://chroma.example:443?secure=true  a server over TLS

Query options: ``collection`` (the index's name, default ``memstack_units``), ``timeout`` (seconds
per request to a server, default 10; the embedded client has none), ``secure`` (TLS to a server).
A URL with a user or password, a database path or another option is refused (field ``vectors``):
memstack passes nothing it would silently drop.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ...errors import InvalidInput
from ..rules.index_urls import query_options, redacted, secure_option, split, timeout_option
from .collections import check_name

DEFAULT_PORT = 8000
DEFAULT_COLLECTION = "memstack_units"
DEFAULT_TIMEOUT = 10.0
OPTIONS = ("collection", "timeout", "secure")
FORMS = "chroma:///ABSOLUTE/DIR (Chroma's embedded client on a folder) or chroma://HOST:PORT (a Chroma server, `chroma run`)"


def _bad(url: str, why: str) -> InvalidInput:
    return InvalidInput(f"vectors URL {redacted(url, 'chroma')!r}: {why}; use {FORMS}", field="vectors")


def parse(url: str) -> dict[str, Any]:
    """The ``ChromaVectorIndex`` arguments a ``chroma://`` URL names: path (the embedded client)
    or host, port and ssl (a server), collection and timeout. InvalidInput (field ``vectors``)
    for anything else."""
    parts, port = split(url, "chroma", _bad)
    if "@" in parts.netloc:
        raise _bad(url, "memstack passes no credentials to Chroma (put an authenticating proxy in front)")
    options = query_options(url, parts.query, OPTIONS, _bad)
    timeout = timeout_option(url, options, DEFAULT_TIMEOUT, _bad)
    secure = secure_option(url, options, _bad)
    found: dict[str, Any] = {"collection": check_name(options.get("collection", DEFAULT_COLLECTION))}
    if not parts.netloc:  # chroma:///abs/dir
        if not parts.path.startswith("/") or len(parts.path.rstrip("/")) < 1 or parts.path == "/":
            raise _bad(url, "the embedded client needs an absolute folder path")
        if secure or "timeout" in options:
            raise _bad(url, "secure and timeout apply to a server, not the embedded client")
        return {**found, "path": unquote(parts.path.rstrip("/"))}
    if not parts.hostname:
        raise _bad(url, "no host")
    if parts.path.strip("/"):
        raise _bad(url, f"a server URL has no path ({parts.path!r}); an embedded folder is chroma:///ABSOLUTE/DIR, with three slashes")
    return {**found, "host": parts.hostname, "port": port or DEFAULT_PORT, "ssl": secure, "timeout": timeout}
