"""Which messages of a resent history are new: chat clients send the whole conversation on every
call, and the thread must hold each message once. Pure functions.

Messages match by role, text and tool calls. The new messages are what follows the longest
prefix of the request that the stored tail ends with:

    stored  u1 a1 u2 a2          request  u1 a1 u2 a2 u3        -> new: u3
    stored  u1                   request  u1  (a retry after a failed call)  -> new: none, answer stored
    stored  u1 a1                request  u1  (the same call again: a regenerate) -> new: none, the answer replaces a1
    stored  u1 a1 a1'(replaces a1)  request  u1 a1' u2  (continued after the regenerate) -> new: u2
    stored  ...                  request  x y  (nothing in common)  -> new: x y

A regenerate is recognised by matching against the stored tail without its trailing answer: the
new answer is stored naming the one it replaces (``memstack.replaced``), which stays in the
thread's history but leaves the thread as the client sees it. The stored tail passed in is that
view (``replaced.visible``), so the next request, which carries the new answer, matches it.

``Resend.first`` says where the request's history starts in the stored tail (the index of the
stored copy of its first message; None when even that one is new): what the thread holds before
it is history the client did not send (a client that sends only its newest message).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..types import Message

#: roles that are stored; the client's system (and developer) messages are instructions, not history
STORED_ROLES = ("user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class Resend:
    """The messages to store before the call, and whether to store the answer after it."""

    new: list[Message]
    store_answer: bool
    #: the index in the stored tail of the request's first message (None: it is new, stored now)
    first: int | None = None
    #: the ids of the stored answer a regenerated one replaces
    replaces: tuple[str, ...] = ()


def fingerprint(m: Message) -> tuple:
    return (m.role, m.text.strip(), tuple((c.name, c.arguments) for c in m.tool_calls), m.tool_call_id)


def overlap(stored: Sequence[Message], incoming: Sequence[Message]) -> int:
    """The largest k such that the last k stored messages equal the first k incoming ones."""
    s = [fingerprint(m) for m in stored]
    c = [fingerprint(m) for m in incoming]
    for k in range(min(len(s), len(c)), 0, -1):
        if s[len(s) - k :] == c[:k]:
            return k
    return 0


def new_messages(stored_tail: Sequence[Message], incoming: Sequence[Message]) -> Resend:
    """Split a request's history (its storable messages, in order) against the thread's stored
    tail (at least as many messages as the request holds, or the whole thread)."""
    k = overlap(stored_tail, incoming)
    if k:
        return Resend(list(incoming[k:]), True, len(stored_tail) - k)
    answered = list(stored_tail)
    while answered and answered[-1].role != "user":
        answered.pop()
    k = overlap(answered, incoming) if len(answered) < len(stored_tail) else 0
    if k:
        rest = list(incoming[k:])
        if rest:
            return Resend(rest, True, len(answered) - k)
        # a regenerate: the request ends where the thread's last answer began
        return Resend([], True, len(answered) - k, tuple(m.id for m in stored_tail[len(answered) :]))
    return Resend(list(incoming), True)
