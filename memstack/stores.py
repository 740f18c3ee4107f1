"""The storage contracts on one screen: small Protocols, every method required.

Every method is scoped: a store never returns or deletes a record outside the Scope it is given.
``Store`` bundles the four stores of one backend so that ``append`` can enqueue write-side jobs
in the same transaction as the messages (add() is durable and atomic: both or neither).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from .errors import Conflict, UsageError
from .types import (
    AuditEvent,
    Change,
    Checkpoint,
    Deletion,
    Expiry,
    IndexSwitch,
    Job,
    JobCursor,
    Message,
    Record,
    Scope,
    Scored,
    SearchFilter,
    StateDocument,
    ThreadInfo,
    Unit,
    UsageRecord,
    UsageTotal,
)

#: ``HistoryStore.append(expect_last=ANY)``: no condition
ANY: Any = object()


def check_last(expected: int | None | object, actual: int | None) -> None:
    """``Conflict`` unless ``expected`` is ANY or the thread's last seq ``actual``."""
    if expected is not ANY and expected != actual:
        raise Conflict(f"the thread changed: its last message is seq {actual}, not {expected}")


class ReadOptions(TypedDict, total=False):
    """``HistoryStore.read``'s filters, each optional: seq > ``after``; timestamp <= ``until``
    (an aware datetime); a role in ``roles``; only the ``last`` n (a count <= 0: none); in
    ``order`` ``"append"`` (seq, the default) or ``"time"`` (instant, then seq). Written once
    here, so every backend takes the same keywords."""

    after: int | None
    until: datetime | None
    last: int | None
    roles: Sequence[str] | None
    order: str


@runtime_checkable
class HistoryStore(Protocol):
    """Append-only message log per thread (scope with thread_id)."""

    def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        """Store ``messages`` in order and request a job per layer name in ``enqueue``, atomically.

        ``expect_last``: store only if the thread's last seq is still this one (None: the thread
        must be empty), else raise ``Conflict`` and store nothing: a read-decide-write by many
        processes (the proxy's resend matching) becomes one transaction.

        Returns the stored messages with ``seq`` set. A message whose id the thread already holds
        is skipped (appending is idempotent by id), and is not returned.
        """
        ...

    def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        """Messages of a thread in append order (``order="time"``: by timestamp, ties in append
        order): with seq > ``after``, timestamp <= ``until``, a role in ``roles``; only the
        ``last`` n of those in that order (``ReadOptions``). An unknown thread reads as empty."""
        ...

    def threads(self, scope: Scope) -> list[ThreadInfo]:
        """The user's threads (for the scope's agent, if it has one), most recent activity first."""
        ...

    def delete_thread(self, scope: Scope, *, layer: str = "library") -> int:
        """Delete a thread's messages and everything keyed to that thread, leaving a deletion note
        by ``layer`` (``Store.deletions``) in the same transaction; returns messages deleted."""
        ...

    def users(self, tenant: str) -> list[str]:
        """The ids of the tenant's users that have messages, sorted."""
        ...


@runtime_checkable
class StateStore(Protocol):
    """One JSON object per scope (user-level when thread_id is None)."""

    def get(self, scope: Scope, name: str = "state") -> dict[str, Any] | None: ...

    def put(self, scope: Scope, value: Mapping[str, Any], name: str = "state") -> None: ...

    def delete(self, scope: Scope, name: str = "state") -> bool: ...

    def swap(self, scope: Scope, value: Mapping[str, Any] | None, *, expect: Mapping[str, Any] | None, name: str = "state") -> bool:
        """Compare and set: write ``value`` (None: delete) only if the stored value equals
        ``expect`` (None: there is none), in one step across threads and processes. Returns
        whether it was written. Values compare as JSON (key order does not matter)."""
        ...

    def dump(self, scope: Scope) -> list[StateDocument]:
        """Every document of the scope's tenant and user (every agent and thread, every name:
        the service's idempotency records too), in no particular order; ``put`` writes one back."""
        ...


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
    after ``lease_seconds`` and the job is claimed again, so no job runs in two workers at once
    while its worker lives (``renew``: the running worker's heartbeat) and a dead worker's job
    reruns elsewhere. ``complete`` records the cursor (the last message seq the layer consumed)
    and the version done, only from the worker that holds the job; work must be idempotent (a
    worker killed mid-job leaves part of its writes, which the rerun writes again).
    """

    def claim(
        self,
        *,
        worker: str,
        lease_seconds: float = 300.0,
        scope: Scope | None = None,
        waiting: bool = False,
        idle_seconds: float | None = None,
    ) -> Job | None:
        """Lease one ready job (of the scope's tenant and user if given); the SQL backends take the
        longest-waiting first. ``waiting`` also leases jobs whose layer is holding turns back for a
        fuller batch (a flush); ``idle_seconds`` leases such a job once its thread's last request
        is that old (a quiet thread: a short session is not held back for ever). A job leased with
        no request pending has ``final`` set: its layer runs what it held back."""
        ...

    def complete(self, job: Job, *, cursor: int, waiting: bool = False) -> bool:
        """Mark the job's requests done up to its version; ``waiting``: the layer holds turns after
        ``cursor`` back until its batch fills (only a flush, ``claim(waiting=True)``, takes it again
        before the next request). Only while the job is still ``job.worker``'s (its lease, expired
        or not, not claimed by another since): True then; False and nothing changed when another
        worker holds it now (its run records it) or the row was deleted."""
        ...

    def renew(self, job: Job, *, lease_seconds: float) -> bool:
        """Extend ``job.worker``'s lease to ``lease_seconds`` from now (the heartbeat of a running
        job); False when the job is no longer this worker's (claimed by another, completed, failed
        or deleted)."""
        ...

    def fail(self, job: Job, error: str, *, retry_in: float) -> None:
        """Count the attempt and keep the job until ``retry_in`` seconds from now; ignored when
        another worker holds the job now."""
        ...

    def pending(self, scope: Scope | None = None) -> int:
        """Jobs with work not yet done: of the scope's tenant and user (any agent, any thread), or all."""
        ...

    def cursors(self, scope: Scope) -> list[JobCursor]:
        """The job rows of the scope's tenant and user (every agent and thread), in no particular
        order: each layer's cursor, pending and waiting marks (``memstack.transfer`` copies them)."""
        ...

    def restore(self, cursors: Sequence[JobCursor]) -> None:
        """Set each (scope, layer) row's cursor and waiting mark as given, and make it pending
        (one request not done) or not, creating the row if needed; no lease is touched."""
        ...


@runtime_checkable
class UnitStore(Protocol):
    """Retrievable units (text + metadata) with a BM25 keyword index over them, per user.

    Keys are (tenant, user_id, agent_id, unit id); ``put`` replaces a unit with the same id.
    Searches and reads see only the scope's tenant+user (and agent, when the scope names one).
    """

    def put(self, units: Sequence[Unit]) -> None: ...

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Unit]:
        """The units with these ids in the scope's user, in the order of ``ids`` (missing ones skipped)."""
        ...

    def in_rounds(self, scope: Scope, rounds: Sequence[int]) -> list[Unit]:
        """The units of the scope's thread (its exact key, agent included) whose round is one of
        ``rounds``, in no particular order: the neighbours of a hit. InvalidInput without a thread."""
        ...

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """Delete units by id in the user, or (ids None) all of the scope's thread, or of the user."""
        ...

    def users(self, tenant: str, *, thread_id: str | None = None) -> list[str]:
        """The ids of the tenant's users that have units (in the thread ``thread_id``, of any
        agent: ``saved.NOTES_THREAD`` for those with saved memories), sorted."""
        ...

    def iterate(self, scope: Scope | None = None, *, batch: int = 500, thread_id: str | None = None) -> Iterator[list[Unit]]:
        """Every unit (of the scope's user, or of the whole store) in batches, for re-indexing;
        only those of the thread ``thread_id`` (of any agent the scope covers) when it is given."""
        ...

    def keyword_search(self, scope: Scope, query: str, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        """BM25 over segmented text (Chinese by jieba, English by words): best first, scores in [0, 1]."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Embeddings of units for nearest-neighbour search, per user, one model and dimension at a time.

    Scores are in [0, 1] (cosine mapped by (1 + cos) / 2), higher is closer, sorted best first.
    """

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        """Store one vector per unit (an (n, d) array); raises InvalidInput on a wrong dimension or
        a different model than the index holds (call ``reset`` to change models)."""
        ...

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]: ...

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        """{unit id: stored vector (unit length, float32)} for the ids found in the scope's user (and
        agent, when it names one); ids of other users are never found."""
        ...

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        """Delete by unit id in the user, or (ids None) the scope's thread, or the whole user."""
        ...

    def info(self) -> tuple[str | None, int | None, int]:
        """(model, dimension, vectors stored): model and dimension are None while empty."""
        ...

    def reset(self) -> None:
        """Drop every vector (before re-embedding with another model)."""
        ...


@runtime_checkable
class Rebuildable(Protocol):
    """A VectorIndex that a reindex rebuilds beside itself instead of emptying it first (Milvus:
    a new collection behind the index's alias), so that searches see the old vectors until the
    new ones are all there, and then the new ones at once, in every process."""

    def stage(self) -> VectorIndex:
        """An empty index that nothing searches yet; fill it, then ``switch`` to it."""
        ...

    def switch(self, staged: VectorIndex) -> IndexSwitch:
        """Make ``staged`` the index every search reads, in one step; say what was kept and dropped."""
        ...


@runtime_checkable
class EmbeddingCache(Protocol):
    """Vectors already computed, keyed by scope (thread), model and a hash of the text, so that a
    rerun job or repeated text costs no model call. Deleting the thread or user deletes them."""

    def get(self, scope: Scope, model: str, hashes: Sequence[str]) -> dict[str, Any]:
        """{hash: vector} for the hashes found."""
        ...

    def put(self, scope: Scope, model: str, vectors: Mapping[str, Any]) -> None: ...

    def delete(self, scope: Scope) -> int:
        """Delete the scope's thread's entries, or the whole user's when thread_id is None."""
        ...


@runtime_checkable
class RecordStore(Protocol):
    """Model-made memory (summaries, entities, relations, state keys) with full history and an
    audit trail, per user. Reads see only the scope's tenant+user (and agent, if named).

    A user-level scope (thread_id None) addresses the user's records; a thread scope that thread's.
    """

    def current(self, scope: Scope, kind: str, keys: Sequence[str] | None = None) -> list[Record]:
        """The current records of a kind at exactly this scope level, by key (all, or these keys)."""
        ...

    def history(self, scope: Scope, kind: str, key: str) -> list[Record]:
        """Every version of one key, oldest first (the last is current unless deleted)."""
        ...

    def apply(self, scope: Scope, changes: Sequence[Change], *, layer: str) -> list[AuditEvent]:
        """Apply the changes in one transaction, each audited; returns the events (no-ops give none)."""
        ...

    def audit(self, scope: Scope, *, kind: str | None = None, limit: int | None = None) -> list[AuditEvent]:
        """The user's audit events (every thread), newest first."""
        ...

    def users(self, tenant: str) -> list[str]:
        """The ids of the tenant's users that have a current record (of any kind, any thread), sorted."""
        ...

    def delete(self, scope: Scope, kind: str | None = None) -> int:
        """Delete records (not audit) of the scope's thread, or (thread_id None) the user's user-level
        records; of one kind or all. Returns rows deleted."""
        ...

    def dump(self, scope: Scope) -> tuple[list[Record], list[AuditEvent]]:
        """Every version of every record of the scope's tenant+user (every agent, every thread,
        deleted ones too) and every audit event, each oldest first as stored: what a copy of the
        store carries (``memstack.transfer``)."""
        ...

    def restore(self, records: Sequence[Record], events: Sequence[AuditEvent]) -> int:
        """Store record versions and audit events verbatim (ids, versions, times kept), in one
        transaction, skipping those whose id the store holds for the user (a rerun adds nothing);
        returns what was stored. Writes no audit event of its own."""
        ...


@runtime_checkable
class UsageLog(Protocol):
    """Model calls per scope: tokens, latency, failures."""

    def record(self, rows: Sequence[UsageRecord]) -> None: ...

    def read(self, scope: Scope, *, since: datetime | None = None) -> list[UsageRecord]:
        """The user's calls (every thread), oldest first."""
        ...

    def totals(
        self, tenant: str, *, since: datetime | None = None, until: datetime | None = None, user_id: str | None = None
    ) -> list[UsageTotal]:
        """The tenant's calls with ``since`` <= at < ``until`` (aware datetimes; None: unbounded),
        summed per (user, layer), sorted by user then layer; only ``user_id``'s when given. The
        cost ceiling (``memstack.ceiling``) and ``memstack usage`` read spend from it."""
        ...


class ProfileStore(Protocol):
    """One memory profile per tenant (see ``memstack.profile``): how every process that opens
    the store builds its layers."""

    def get(self, tenant: str) -> dict[str, Any] | None: ...

    def put(self, tenant: str, value: Mapping[str, Any], *, replace: bool = False) -> dict[str, Any]:
        """Store ``value`` as the tenant's profile unless it has one (``replace``: overwrite);
        returns the profile the tenant has afterwards. Two processes that race to write the
        first profile agree on the one that was stored first."""
        ...


class AsyncHistory(Protocol):
    """The history's calls on the request path as coroutines, for a backend with native async
    I/O: the same semantics as ``HistoryStore``'s ``append``, ``read``, ``threads`` and
    ``JobQueue.pending``. A Store offers one through an ``async_history()`` method (PostgreSQL:
    psycopg's async pool); ``AsyncMemory`` runs the blocking store in threads where it has none.
    Bound to the event loop it is first used on; ``aclose`` releases its connections."""

    async def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]: ...

    async def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]: ...

    async def threads(self, scope: Scope) -> list[ThreadInfo]: ...

    async def pending(self, scope: Scope | None = None) -> int: ...

    async def aclose(self) -> None: ...


class Store(Protocol):
    """One backend's stores, sharing a connection; ``delete_user`` erases a user everywhere.

    Backends that support retrieval (memory, SQLite, PostgreSQL) also have ``units``
    (UnitStore), ``vectors`` (VectorIndex) and ``embeddings`` (EmbeddingCache); the same backends
    have ``records`` (RecordStore) and ``usage`` (UsageLog) for the model-backed layers.
    """

    # read-only in the protocol, so a backend's own classes fit (SQLiteStore.history is a SQLiteHistory)
    @property
    def history(self) -> HistoryStore: ...

    @property
    def state(self) -> StateStore: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    @property
    def jobs(self) -> JobQueue: ...

    @property
    def profiles(self) -> ProfileStore: ...

    @property
    def url(self) -> str: ...

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        """Delete every record of the scope's tenant+user in every store, and the LangGraph
        threads checkpointed for the user in the same database (``backends.adapter_rows``),
        leaving a deletion note by ``layer`` in the same transaction; returns rows deleted."""
        ...

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Leave the note of a deletion made outside ``delete_user`` and ``delete_thread`` (a saved
        memory, ``kind="note"``, ``name`` its id): ``counts`` by ``backends.deletions.COUNTED``."""
        ...

    def expire(self, tenant: str, expiry: Expiry, *, layer: str = "retention") -> list[Deletion]:
        """A retention pass (``memstack.retention``): delete the tenant's rows older than
        ``expiry`` says (messages by their timestamp, audit events and model calls by when they
        were recorded) and, with ``expiry.derived``, the model-made memories that stood on the
        expired messages only (``backends.rules.expiry``), user by user: each user's rows and a
        note of kind ``expired`` by ``layer`` in one transaction. Returns the notes (none for a
        user with nothing expired); no other tenant's rows are read or touched."""
        ...

    def tenants(self) -> list[str]:
        """The tenants that hold anything (messages, state, model-made memory, units, model calls,
        a profile), sorted: what a whole-store copy or export walks (``memstack.transfer``)."""
        ...

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes, oldest first; with ``user_id`` only that user's (their
        threads and saved memories, and the user itself if it was forgotten before). A note holds
        no content and no id (``types.Deletion``), and outlives what it deleted."""
        ...

    def noted_tenants(self) -> list[str]:
        """The tenants with deletion notes, sorted: a tenant whose every user was forgotten holds
        nothing else (``tenants`` leaves it out), and a whole-store copy carries its notes too."""
        ...

    def deletion_key(self) -> bytes | None:
        """The secret key the notes' hashes are made with (``backends.rules.deletions``), made on
        the store's first deletion: None before. What a copy carries with the notes; never shown."""
        ...

    def restore_deletions(self, key: bytes, notes: Sequence[Deletion]) -> int:
        """Store ``notes``, made under ``key``, verbatim (a copy's): the store adopts ``key`` when
        it has none or holds no note, and refuses (UsageError, nothing written) when it holds notes
        under another key (``rules.deletions.adopts``: hashes cannot be re-keyed). A note the store
        holds already is skipped (``rules.deletions.missing``: restoring twice stores nothing the
        second time). Returns the notes stored."""
        ...

    def close(self) -> None:
        """Release connections; calling it twice is harmless."""
        ...


def records_of(store: Store) -> RecordStore:
    """The store's RecordStore, or UsageError for a backend without one (jsonl)."""
    records: RecordStore | None = getattr(store, "records", None)
    if records is None:
        raise UsageError(f"the {type(store).__name__} backend keeps no model-made memory; use sqlite, postgresql or memory")
    return records


def usage_of(store: Store) -> UsageLog:
    """The store's UsageLog, or UsageError for a backend without one (jsonl)."""
    usage: UsageLog | None = getattr(store, "usage", None)
    if usage is None:
        raise UsageError(f"the {type(store).__name__} backend records no model usage; use sqlite, postgresql or memory")
    return usage
