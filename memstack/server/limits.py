"""Bounded request bodies: an ASGI middleware that answers 413 (JSON) past ``max_bytes``, and 408
when a body does not arrive whole within ``body_seconds`` (a stalled or half-sent request would
otherwise hold its connection and its worker forever).

A declared Content-Length over the limit is refused before any byte is read; a chunked body is
read up to the limit and refused as soon as it passes it, so no handler ever sees more than
``max_bytes``. The body read here is replayed to the app unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .errors import error_response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, body_seconds: float | None = 30.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_seconds = body_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send, declared)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        deadline = None if self.body_seconds is None else asyncio.get_running_loop().time() + self.body_seconds
        while more:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                message_text = f"the request body did not arrive within {self.body_seconds:g} s ({size} bytes came)"
                await error_response(408, "request_timeout", message_text, "body", headers={"connection": "close"})(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send, size)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: int) -> None:
        """The 413 made by ``error_response``, the one maker of every error the app answers: the
        same JSON (and bytes) as a 422 or 404, naming the field "body"; the connection is closed
        since the rest of the body is never read."""
        message = f"the request body is over the limit of {self.max_bytes} bytes ({size}+ bytes)"
        response = error_response(413, "body_too_large", message, "body", headers={"connection": "close"})
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later reads wait for the disconnect, as the server's own would

    return replay
