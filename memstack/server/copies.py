"""Copies of one chat completion at once: the first copy claims the request and answers it; the
others wait for that answer and answer it too, storing nothing and calling no model.

A claim is a value in the thread's state (``StateStore.swap``: compare and set, one step across
processes and servers), so any number of servers on one store agree on which copy answers:

- a request with an ``Idempotency-Key`` claims ``idempotency:<key>``. Its answer replaces the
  claim and is kept with the thread: every copy, at once or any time later, answers it.
- a request without a key claims the thread's ``proxy:request``, named by a fingerprint of the
  request (its messages, model and parameters, not whether it streams). **A double submit** is a
  request identical to one that is still being answered, or that was answered less than
  ``window`` seconds ago (default 2 s): it answers what the first one answered. An identical
  request after that is a **regenerate** (``resend``): its new answer replaces the stored one. A
  different request while another is in flight in the same thread goes ahead unclaimed (the
  conditional append still stores each message once).

A claim is held for ``lease`` seconds and renewed while its copy runs (a model can stream for
minutes); a copy whose process died loses it when the lease ends, and a waiting copy takes it
over and answers. A copy whose model call failed gives its claim up at once, so a waiting copy
(or a retry) calls the model itself. A copy waits at most ``wait`` seconds for another's
answer; then ``Conflict`` (409): the request is still being answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..aio import AsyncMemory
from ..errors import Conflict
from ..types import Scope
from .idempotency import PREFIX

log = logging.getLogger("memstack.server")

KEYED = PREFIX
UNKEYED = "proxy:request"
#: seconds after an answer in which an identical unkeyed request is a double submit, not a regenerate
DEFAULT_WINDOW = 2.0
DEFAULT_LEASE = 30.0
DEFAULT_WAIT = 600.0


def fingerprint(body: dict[str, Any]) -> str:
    """What makes two requests copies of one another: everything but how the answer is sent."""
    same = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    return hashlib.sha256(json.dumps(same, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Replay:
    """Another copy's answer: answer it again."""

    response: dict[str, Any]


@dataclass
class Held:
    """This copy's claim: renew it while answering, then ``finish`` with the answer or ``release``."""

    memory: AsyncMemory
    scope: Scope
    name: str
    request: str
    lease: float
    record: dict[str, Any] | None
    done: bool = False
    _renewer: asyncio.Task[None] | None = field(default=None, repr=False)

    async def _swap(self, value: dict[str, Any] | None) -> bool:
        ok = await self.memory.run_sync(self.memory.memory.store.state.swap, self.scope, value, expect=self.record, name=self.name)
        if ok:
            self.record = value
        return ok

    def start_renewing(self) -> None:
        if self.record is not None and self._renewer is None:
            self._renewer = asyncio.create_task(self._renew())

    async def renew(self) -> bool:
        """Hold the claim for another ``lease`` seconds; False when it was lost (this copy
        stalled past its lease and another took it over)."""
        if self.done or self.record is None:
            return False
        if await self._swap({**self.record, "until": time.time() + self.lease}):
            return True
        log.warning("lost the claim on %s of %s/%s (it ran past its lease)", self.name, self.scope.user_id, self.scope.thread_id)
        self.record = None
        return False

    async def _renew(self) -> None:
        until = time.monotonic() + DEFAULT_WAIT  # a stream whose relay never ran (its client left) stops renewing
        while not self.done and time.monotonic() < until:
            await asyncio.sleep(self.lease / 3)
            if not await self.renew():
                return

    async def finish(self, response: dict[str, Any]) -> None:
        """Replace the claim with the answer, for the copies waiting and those to come."""
        self._stop()
        answered = {"response": response, "at": time.time(), "request": self.request}
        if self.record is not None and await self._swap(answered):
            return
        if self.name.startswith(KEYED):  # the claim was lost (a stall past its lease): the key keeps an answer anyway
            current = await self.memory.run_sync(self.memory.memory.store.state.get, self.scope, self.name)
            if current is None or "response" not in current:
                await self.memory.run_sync(self.memory.memory.store.state.put, self.scope, answered, self.name)

    async def release(self) -> None:
        """Give the claim up unanswered (the model call failed): a waiting copy answers instead."""
        self._stop()
        if self.record is not None:
            await self._swap(None)

    def _stop(self) -> None:
        self.done = True
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None


async def settle(
    memory: AsyncMemory,
    scope: Scope,
    body: dict[str, Any],
    key: str | None,
    *,
    window: float = DEFAULT_WINDOW,
    lease: float = DEFAULT_LEASE,
    wait: float = DEFAULT_WAIT,
    waiting: Callable[[], None] | None = None,
) -> Held | Replay:
    """Claim this request, or the answer of the copy that claimed it first (waiting for it while
    it is being answered). ``waiting`` is called once if this copy waits."""
    name = KEYED + key if key is not None else UNKEYED
    request = fingerprint(body)
    state = memory.memory.store.state
    token = uuid.uuid4().hex
    started = time.monotonic()
    pause = 0.01
    waited = False
    while True:
        record = await memory.run_sync(state.get, scope, name)
        now = time.time()
        claim = {"claim": token, "until": now + lease, "request": request}
        if record is not None and "response" in record:
            if key is not None or (record.get("request") == request and now - float(record.get("at", 0)) <= window):
                return Replay(record["response"])
        elif record is not None and key is None and record.get("request") != request and float(record.get("until", 0)) > now:
            return Held(memory, scope, name, request, lease, None)  # another request is in flight in this thread: go ahead unclaimed
        elif record is not None and float(record.get("until", 0)) > now:  # a copy is being answered
            if time.monotonic() - started > wait:
                raise Conflict("a copy of this request is still being answered; retry it later")
            if not waited and waiting is not None:
                waiting()
            waited = True
            await asyncio.sleep(pause)
            pause = min(pause * 1.5, 0.25)
            continue
        # none, an expired claim (its copy died), an old answer of another request: claim it
        if await memory.run_sync(state.swap, scope, claim, expect=record, name=name):
            held = Held(memory, scope, name, request, lease, claim)
            held.start_renewing()
            return held
