"""What ``Client`` and ``AsyncClient`` hold alike: the service's URL, the key's header and the
retry policy, checked (``options``); one httpx client (pooled, kept-alive connections) of the kind
each needs; and the answers asked once per client (the tenant). Constructing one connects to nothing.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, TypeVar

from ..errors import InvalidInput, require
from .transport import Exchange, Retries, Step, Try

#: the environment variable an API key is read from when none is given
KEY_ENV = "MEMSTACK_API_KEY"
DEFAULT_TIMEOUT = 30.0
R = TypeVar("R")


def options(url: str, api_key: str | None, timeout: float | None, retries: int | Retries) -> tuple[str, dict[str, str], Retries]:
    """The base URL, the headers and the retry policy of a client, checked."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidInput(f"a memstack service URL starts with http:// or https://, not {url!r}", field="url")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise InvalidInput("timeout must be a number of seconds above 0, or None", field="timeout")
    key = api_key if api_key is not None else os.environ.get(KEY_ENV) or None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return url.rstrip("/"), headers, retries if isinstance(retries, Retries) else Retries(attempts=retries)


class Connection:
    """The base of both clients; ``HTTP`` names the httpx client class a subclass sends with."""

    HTTP: ClassVar[str]

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retries: int | Retries = 3,
        transport: Any = None,
    ) -> None:
        httpx = require("httpx", extra="client")
        self.url, headers, self.retries = options(url, api_key, timeout, retries)
        self._http = getattr(httpx, self.HTTP)(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._broken: type[Exception] = httpx.TransportError
        self._cache: dict[tuple[str, str], Any] = {}

    def _exchange(self, step: Step[R]) -> Exchange[R]:
        return Exchange(step, self.retries, self.url, self._cache)

    def _request(self, attempt: Try) -> Any:
        """The call that sends a try (a coroutine's for the asyncio client)."""
        return self._http.request(attempt.method, attempt.path, params=attempt.params, content=attempt.content, headers=attempt.headers)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
