"""What a vector index's URL (``milvus://``, ``chroma://``) checks the same way: its scheme and
port, each known query option once, ``timeout`` a number of seconds in (0, 3600], ``secure``
true or false, and no user name or password in a message (``redacted``).

A URL's checks fail with the backend's own ``InvalidInput`` (``bad(url, why)``), which says what
the backend's URLs look like and shows the URL ``redacted``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import SplitResult, parse_qs, urlsplit

from ...errors import InvalidInput

Bad = Callable[[str, str], InvalidInput]


def redacted(url: str, scheme: str) -> str:
    """The URL with any user name and password replaced by ``***`` (for messages and logs);
    ``scheme://***`` for one that does not split."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{scheme}://***"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()


def split(url: object, scheme: str, bad: Bad) -> tuple[SplitResult, int | None]:
    """A ``scheme://`` URL's parts and port."""
    if not isinstance(url, str) or not url.startswith(scheme + "://"):
        raise bad(str(url), f"not a {scheme}:// URL")
    try:
        parts = urlsplit(url)
        return parts, parts.port
    except ValueError as exc:
        raise bad(url, str(exc)) from exc


def query_options(url: str, query: str, known: Sequence[str], bad: Bad) -> dict[str, str]:
    """The options of ``query``, each known and given once."""
    parsed = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(parsed) - set(known))
    if unknown:
        raise bad(url, f"unknown option {unknown[0]!r} (the options are {', '.join(known)})")
    if any(len(v) > 1 for v in parsed.values()):
        raise bad(url, "an option is given twice")
    return {k: v[0] for k, v in parsed.items()}


def timeout_option(url: str, options: dict[str, str], default: float, bad: Bad) -> float:
    """``timeout`` in seconds (``default`` when not given)."""
    try:
        timeout = float(options.get("timeout", default))
    except ValueError:
        raise bad(url, "timeout must be a number of seconds") from None
    if not 0 < timeout <= 3600:
        raise bad(url, "timeout must be more than 0 and at most 3600 seconds")
    return timeout


def secure_option(url: str, options: dict[str, str], bad: Bad) -> bool:
    """Whether ``secure`` asks for TLS (false when not given)."""
    secure = options.get("secure", "false").lower()
    if secure not in ("true", "false", "1", "0"):
        raise bad(url, "secure must be true or false")
    return secure in ("true", "1")
