"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on each request's head.

uvicorn closes a keep-alive connection that sends nothing for ``timeout_keep_alive`` seconds after a
response, but a connection that opens and sends nothing, or sends half a request line or half its
headers and stops, stays open for as long as the client likes: 20 such connections were all still
open after 40 s, each holding a socket and a file descriptor (a slowloris). ``HeadDeadline`` gives
each request head (request line and headers) ``seconds`` to arrive whole, counted from the
connection's opening or from the first bytes of a later request on it, then closes the connection.
The body has its own limit (``limits.BodyLimit``, ``--body-timeout``).

The deadline comes from the uvicorn Config's ``memstack_header_seconds`` attribute (set by
``run``), else ``$MEMSTACK_HEADER_TIMEOUT`` (how ``serve --workers`` passes it to its worker
processes), else ``DEFAULT_HEADER_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_HEADER_SECONDS = 10.0
ENV = "MEMSTACK_HEADER_TIMEOUT"
log = logging.getLogger("memstack.server")


def header_seconds(config: Any) -> float | None:
    value = getattr(config, "memstack_header_seconds", None)
    if value is None:
        env = os.environ.get(ENV, "").strip()
        value = float(env) if env else DEFAULT_HEADER_SECONDS
    return value if value and value > 0 else None


class HeadDeadline(H11Protocol):
    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._head_seconds = header_seconds(config)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self._head_timer is None:  # the first bytes of a later request on a kept-alive connection
                self._arm()
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        self._disarm()  # until the next request's first bytes: the keep-alive timeout covers the silence
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        if self._head_seconds is not None:
            self._head_timer = self.loop.call_later(self._head_seconds, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            prefix = f"{self.client[0]}:{self.client[1]} - " if self.client else ""
            log.info("%sclosed a connection whose request head did not arrive within %.0f s", prefix, self._head_seconds)
            self.transport.close()
