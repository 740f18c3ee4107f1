"""The storage contracts on one screen: small Protocols, every method required.

Every method is scoped: a store never returns or deletes a record outside the Scope it is given.
``Store`` bundles the four stores of one backend so that ``append`` can enqueue write-side jobs
in the same transaction as the messages (add() is durable and atomic: both or neither).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .types import Checkpoint, Job, Message, Scope, ThreadInfo


@runtime_checkable
class HistoryStore(Protocol):
    """Append-only message log per thread (scope with thread_id)."""

    def append(self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = ()) -> list[Message]:
        """Store ``messages`` in order and request a job per layer name in ``enqueue``, atomically.

        Returns the stored messages with ``seq`` set. A message whose id the thread already holds
        is skipped (appending is idempotent by id), and is not returned.
        """
        ...

    def read(
        self, scope: Scope, *, after: int | None = None, until: datetime | None = None, last: int | None = None, roles: Sequence[str] | None = None
    ) -> list[Message]:
        """Messages of a thread in append order: with seq > ``after``, timestamp <= ``until``, a
        role in ``roles``; only the ``last`` n of those. An unknown thread reads as empty."""
        ...

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        """The user's threads (for the scope's agent, if it has one), most recent activity first."""
        ...

    def delete_thread(self, scope: Scope) -> int:
        """Delete a thread's messages and everything keyed to that thread; returns messages deleted."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """One JSON object per scope (user-level when thread_id is None)."""

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None: ...

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None: ...

    def delete(self, scope: Scope, name: str = "state") -> bool: ...


@runtime_checkable
class CheckpointStore(Protocol):
    """Snapshots of a thread; only the newest ``keep`` are retained."""

    def save(self, scope: Scope, data: Mapping[str, Any], *, keep: int = 10, at: datetime | None = None) -> Checkpoint: ...

    def latest(self, scope: Scope) -> Checkpoint | None: ...

    def list(self, scope: Scope) -> list[Checkpoint]:
        """Retained snapshots, newest first."""
        ...


@runtime_checkable
class JobQueue(Protocol):
    """Durable write-side work: one row per (scope, layer), coalescing repeated requests.

    ``claim`` leases a job whose requests are not all done; a worker that dies loses its lease
    after ``lease_seconds`` and the job is claimed again. ``complete`` records the cursor (the
    last message seq the layer consumed) and the version done; work must be idempotent.
    """

    def claim(self, *, worker: str, lease_seconds: float = 300.0, scope: Scope | None = None) -> Job | None:
        """Lease one ready job (of the scope's tenant and user if given); the SQL backends take the
        longest-waiting first."""
        ...

    def complete(self, job: Job, *, cursor: int) -> None: ...

    def fail(self, job: Job, error: str, *, retry_in: float) -> None: ...

    def pending(self, scope: Scope | None = None) -> int:
        """Jobs with work not yet done: of the scope's tenant and user (any agent, any thread), or all."""
        ...


class Store(Protocol):
    """One backend's stores, sharing a connection; ``delete_user`` erases a user everywhere."""

    history: HistoryStore
    state: StateStore
    checkpoints: CheckpointStore
    jobs: JobQueue
    url: str

    def delete_user(self, scope: Scope) -> int:
        """Delete every record of the scope's tenant+user in every store; returns rows deleted."""
        ...

    def close(self) -> None:
        """Release connections; calling it twice is harmless."""
        ...
