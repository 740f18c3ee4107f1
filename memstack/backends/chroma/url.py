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
from urllib.parse import parse_qs, unquote, urlsplit

from ...errors import InvalidInput
from .collections import check_name

DEFAULT_PORT = 8000
DEFAULT_COLLECTION = "memstack_units"
DEFAULT_TIMEOUT = 10.0
OPTIONS = ("collection", "timeout", "secure")
FORMS = "chroma:///ABSOLUTE/DIR (Chroma's embedded client on a folder) or chroma://HOST:PORT (a Chroma server, `chroma run`)"


def _bad(url: str, why: str) -> InvalidInput:
    return InvalidInput(f"vectors URL {url!r}: {why}; use {FORMS}", field="vectors")


def _options(url: str, query: str) -> dict[str, str]:
    parsed = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(parsed) - set(OPTIONS))
    if unknown:
        raise _bad(url, f"unknown option {unknown[0]!r} (the options are {', '.join(OPTIONS)})")
    if any(len(v) > 1 for v in parsed.values()):
        raise _bad(url, "an option is given twice")
    return {k: v[0] for k, v in parsed.items()}


def parse(url: str) -> dict[str, Any]:
    """The ``ChromaVectorIndex`` arguments a ``chroma://`` URL names: path (the embedded client)
    or host, port and ssl (a server), collection and timeout. InvalidInput (field ``vectors``)
    for anything else."""
    if not isinstance(url, str) or not url.startswith("chroma://"):
        raise _bad(str(url), "not a chroma:// URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _bad(url.split("@")[-1], str(exc)) from exc
    if "@" in parts.netloc:
        raise _bad(
            "chroma://***@" + parts.netloc.rsplit("@", 1)[1],
            "memstack passes no credentials to Chroma (put an authenticating proxy in front)",
        )
    options = _options(url, parts.query)
    try:
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
    except ValueError:
        raise _bad(url, "timeout must be a number of seconds") from None
    if not 0 < timeout <= 3600:
        raise _bad(url, "timeout must be more than 0 and at most 3600 seconds")
    secure = options.get("secure", "false").lower()
    if secure not in ("true", "false", "1", "0"):
        raise _bad(url, "secure must be true or false")
    found: dict[str, Any] = {"collection": check_name(options.get("collection", DEFAULT_COLLECTION))}
    if not parts.netloc:  # chroma:///abs/dir
        if not parts.path.startswith("/") or len(parts.path.rstrip("/")) < 1 or parts.path == "/":
            raise _bad(url, "the embedded client needs an absolute folder path")
        if secure in ("true", "1") or "timeout" in options:
            raise _bad(url, "secure and timeout apply to a server, not the embedded client")
        return {**found, "path": unquote(parts.path.rstrip("/"))}
    if not parts.hostname:
        raise _bad(url, "no host")
    if parts.path.strip("/"):
        raise _bad(url, f"a server URL has no path ({parts.path!r}); an embedded folder is chroma:///ABSOLUTE/DIR, with three slashes")
    return {**found, "host": parts.hostname, "port": port or DEFAULT_PORT, "ssl": secure in ("true", "1"), "timeout": timeout}
