"""A LangGraph checkpointer over a memstack store: an agent's graph state in the same database as
its users' messages (a SQLite file, a PostgreSQL schema, or ``memory://`` in tests).

memstack's own CheckpointStore keeps the newest N JSON snapshots of a thread and no pending
writes; LangGraph needs every checkpoint, per-channel blobs at each version, parent links and
per-task writes. So the saver keeps LangGraph's own layout in ``lg_*`` tables (see ``tables``):
a checkpoint row (the checkpoint without its channel values, and its metadata), one blob row
per (channel, version) written, and one row per pending write. Values go through LangGraph's
serializer (``serde``), so whatever LangGraph can checkpoint round-trips exactly.

Every row carries the saver's ``tenant``; thread ids are unique within a tenant. A checkpoint
put under a config whose ``configurable`` names a ``user_id`` is tagged with it, so that
``delete_user`` erases a user's threads, and so does forgetting the user through memstack
(``Memory.forget``, ``memstack forget``, the REST DELETE, in any process: the backends' user
deletion reaches these tables, ``memstack.backends.adapter_rows``); forgetting a thread of the
user deletes that thread's checkpoints.

``memory=Memory(...)``: the saver also mirrors each root checkpoint's messages into that
memory's history, once each (``langgraph_mirror``), so its layers run on the graph's
conversation; the checkpoints then live in the memory's own database.
The async methods run the sync ones in a worker thread: the calls are short, and SQLite's lock
serialises them anyway.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ..errors import UsageError, importing
from ..memory import Memory
from .tables import Tables, open_tables

with importing("langgraph-checkpoint", "langgraph"):
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        SerializerProtocol,
        get_checkpoint_id,
        get_checkpoint_metadata,
    )

from .langgraph_mirror import Mirror  # noqa: E402  # after the check: it needs langchain-core

_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, parent_id, type, checkpoint, metadata_type, metadata"


class MemstackSaver(BaseCheckpointSaver[str]):
    """LangGraph checkpoints in a memstack store (``sqlite:///file.db``, ``postgresql://...``, ``memory://``).

    ``target``: a Memory, a Store, a URL or path, or None for the default SQLite file under
    MEMSTACK_HOME (the one ``Memory()`` uses). Lists are newest first (by checkpoint id);
    ``list`` filters on metadata by equality of each given key.

    ``memory``: mirror the graph's messages (state channel ``messages_key``) into this Memory's
    history (see ``langgraph_mirror``); every root checkpoint must then be put under a config
    with ``configurable["user_id"]`` (UsageError otherwise). The checkpoints go into the memory's
    store (``target`` may be omitted, or be that Memory or its store), and ``tenant`` defaults
    to the memory's.
    """

    def __init__(
        self,
        target: Any = None,
        *,
        tenant: str | None = None,
        serde: SerializerProtocol | None = None,
        memory: Memory | None = None,
        messages_key: str = "messages",
    ) -> None:
        super().__init__(serde=serde)
        if memory is not None and target is not None and target is not memory and target is not memory.store:
            raise UsageError(
                "MemstackSaver(memory=...) keeps the checkpoints in the memory's database, so that forgetting a user reaches them: leave out target"
            )
        self.tables: Tables = open_tables(memory if memory is not None else target)
        self.tenant = tenant if tenant is not None else memory.tenant if memory is not None else "default"
        self.mirror = None if memory is None else Mirror(memory, tenant=self.tenant, key=messages_key)

    # ---- reading -----------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint the config names, or the thread's (and namespace's) newest; None if absent."""
        thread_id, ns = _thread(config), _namespace(config)
        checkpoint_id = get_checkpoint_id(config)
        where = "tenant = ? AND thread_id = ? AND checkpoint_ns = ?" + (" AND checkpoint_id = ?" if checkpoint_id else "")
        params = [self.tenant, thread_id, ns] + ([checkpoint_id] if checkpoint_id else [])
        rows = self.tables.query(f"SELECT {_COLUMNS} FROM lg_checkpoints WHERE {where} ORDER BY checkpoint_id DESC LIMIT 1", params)
        return self._tuple(rows[0]) if rows else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints of the config's thread (namespace, id, if it names them; every thread for
        None), newest first, older than ``before``, whose metadata has each ``filter`` item."""
        where, params = ["tenant = ?"], [self.tenant]
        configurable = (config or {}).get("configurable", {})
        for column, value in (
            ("thread_id", configurable.get("thread_id")),
            ("checkpoint_ns", configurable.get("checkpoint_ns")),
            ("checkpoint_id", configurable.get("checkpoint_id")),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(str(value))
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append("checkpoint_id < ?")
            params.append(before_id)
        sql = f"SELECT {_COLUMNS} FROM lg_checkpoints WHERE {' AND '.join(where)} ORDER BY checkpoint_id DESC"
        if limit is not None and not filter:
            sql += f" LIMIT {max(0, int(limit))}"
        left = limit
        for row in self.tables.query(sql, params):
            if left is not None and left <= 0:
                return
            metadata = self.serde.loads_typed((row[6], row[7]))
            if filter and not all(metadata.get(key) == value for key, value in filter.items()):
                continue
            if left is not None:
                left -= 1
            yield self._tuple(row, metadata)

    def _tuple(self, row: tuple, metadata: CheckpointMetadata | None = None) -> CheckpointTuple:
        thread_id, ns, checkpoint_id, parent_id, type_, blob, metadata_type, metadata_blob = row
        checkpoint: Checkpoint = self.serde.loads_typed((type_, blob))
        checkpoint = {**checkpoint, "channel_values": self._values(thread_id, ns, checkpoint["channel_versions"])}
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=metadata if metadata is not None else self.serde.loads_typed((metadata_type, metadata_blob)),
            parent_config=_config(thread_id, ns, parent_id) if parent_id else None,
            pending_writes=self._writes(thread_id, ns, checkpoint_id),
        )

    def _values(self, thread_id: str, ns: str, versions: ChannelVersions) -> dict[str, Any]:
        """The channel values at the checkpoint's versions (channels written empty are absent)."""
        if not versions:
            return {}
        pairs = [(channel, str(version)) for channel, version in versions.items()]
        rows = self.tables.query(
            f"SELECT channel, type, blob FROM lg_blobs WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND (channel, version) IN (VALUES {', '.join(['(?, ?)'] * len(pairs))})",
            [self.tenant, thread_id, ns, *(x for pair in pairs for x in pair)],
        )
        return {channel: self.serde.loads_typed((type_, blob)) for channel, type_, blob in rows if type_ != "empty"}

    def _writes(self, thread_id: str, ns: str, checkpoint_id: str) -> list[tuple[str, str, Any]]:
        """Pending writes in the order live execution applies them (task path, task id, index)."""
        rows = self.tables.query(
            "SELECT task_id, channel, type, value FROM lg_writes WHERE tenant = ? AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? ORDER BY task_path, task_id, idx",
            (self.tenant, thread_id, ns, checkpoint_id),
        )
        return [(task_id, channel, self.serde.loads_typed((type_, value))) for task_id, channel, type_, value in rows]

    # ---- writing -----------------------------------------------------------------------------

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        """Store a checkpoint and the blobs of the channels written at ``new_versions``; the
        config's checkpoint id (if any) becomes its parent."""
        thread_id, ns = _thread(config), _namespace(config)
        mirrored = self.mirror is not None and ns == ""
        user_id = self.mirror.require_user(config.get("configurable", {})) if mirrored else config.get("configurable", {}).get("user_id")  # type: ignore[union-attr]
        stored = dict(checkpoint)
        values = stored.pop("channel_values", {})
        type_, blob = self.serde.dumps_typed(stored)
        meta = get_checkpoint_metadata(config, metadata)
        meta_type, meta_blob = self.serde.dumps_typed(meta)
        blobs = [
            (
                self.tenant,
                thread_id,
                ns,
                channel,
                str(version),
                *(self.serde.dumps_typed(values[channel]) if channel in values else ("empty", b"")),
            )
            for channel, version in new_versions.items()
        ]
        with self.tables.write() as tx:
            if mirrored:
                _check_owner(tx, self.tenant, thread_id, str(user_id))
            tx.executemany(
                "INSERT INTO lg_blobs VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, thread_id, checkpoint_ns, channel, version) "
                "DO UPDATE SET type = excluded.type, blob = excluded.blob",
                blobs,
            )
            tx.execute(
                "INSERT INTO lg_checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET parent_id = excluded.parent_id, "
                "type = excluded.type, checkpoint = excluded.checkpoint, metadata_type = excluded.metadata_type, metadata = excluded.metadata, "
                "run_id = excluded.run_id, user_id = excluded.user_id",
                (
                    self.tenant, thread_id, ns, checkpoint["id"], get_checkpoint_id(config), type_, blob, meta_type, meta_blob,
                    _text(meta.get("run_id")), _text(user_id),
                ),
            )  # fmt: skip
        if mirrored and self.mirror.key in new_versions:  # type: ignore[union-attr]  # after the commit: see langgraph_mirror
            self.mirror.put(str(user_id), thread_id, checkpoint)  # type: ignore[union-attr, arg-type]
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        """Store a task's writes for the config's checkpoint. Writing the same (task, index) again
        changes nothing, except for the special channels (error, interrupt...), which are replaced."""
        thread_id, ns = _thread(config), _namespace(config)
        checkpoint_id = config["configurable"]["checkpoint_id"]
        regular, special = [], []
        for idx, (channel, value) in enumerate(writes):
            index = WRITES_IDX_MAP.get(channel, idx)
            row = (self.tenant, thread_id, ns, checkpoint_id, task_id, index, channel, *self.serde.dumps_typed(value), task_path)
            (special if index < 0 else regular).append(row)
        insert = "INSERT INTO lg_writes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
        with self.tables.write() as tx:
            tx.executemany(insert + "DO NOTHING", regular)
            tx.executemany(
                insert
                + "DO UPDATE SET channel = excluded.channel, type = excluded.type, value = excluded.value, task_path = excluded.task_path",
                special,
            )

    # ---- deleting and copying ----------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of the thread (every namespace)."""
        with self.tables.write() as tx:
            for table in ("lg_checkpoints", "lg_blobs", "lg_writes"):
                tx.execute(f"DELETE FROM {table} WHERE tenant = ? AND thread_id = ?", (self.tenant, str(thread_id)))

    def delete_user(self, user_id: str) -> int:
        """Delete every thread with a checkpoint put for ``user_id``; returns threads deleted."""
        threads = [
            row[0]
            for row in self.tables.query(
                "SELECT DISTINCT thread_id FROM lg_checkpoints WHERE tenant = ? AND user_id = ?", (self.tenant, user_id)
            )
        ]
        for thread_id in threads:
            self.delete_thread(thread_id)
        return len(threads)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) made by these runs, in every thread."""
        if not run_ids:
            return
        marks = ", ".join("?" * len(run_ids))
        selected = f"SELECT thread_id, checkpoint_ns, checkpoint_id FROM lg_checkpoints WHERE tenant = ? AND run_id IN ({marks})"
        with self.tables.write() as tx:
            tx.execute(
                f"DELETE FROM lg_writes WHERE tenant = ? AND (thread_id, checkpoint_ns, checkpoint_id) IN ({selected})",
                (self.tenant, self.tenant, *run_ids),
            )
            tx.execute(f"DELETE FROM lg_checkpoints WHERE tenant = ? AND run_id IN ({marks})", (self.tenant, *run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob and write of one thread to another (rows it has are kept)."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self.tables.write() as tx:
            for table, columns in _COPIED.items():
                tx.execute(
                    f"INSERT INTO {table} SELECT tenant, CAST(? AS TEXT), {columns} FROM {table} WHERE tenant = ? AND thread_id = ? ON CONFLICT DO NOTHING",
                    (target, self.tenant, source),
                )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint (with its writes and the blobs it
        reads); ``delete``: delete the threads. Graphs with DeltaChannel need their ancestors:
        do not prune those with keep_latest."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}; expected keep_latest or delete")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                self._keep_latest(str(thread_id))

    def _keep_latest(self, thread_id: str) -> None:
        key = "tenant = ? AND thread_id = ?"
        same = "c.tenant = {t}.tenant AND c.thread_id = {t}.thread_id AND c.checkpoint_ns = {t}.checkpoint_ns"
        with self.tables.write() as tx:
            newest = f"SELECT MAX(checkpoint_id) FROM lg_checkpoints c WHERE {same.format(t='lg_checkpoints')}"
            tx.execute(f"DELETE FROM lg_checkpoints WHERE {key} AND checkpoint_id <> ({newest})", (self.tenant, thread_id))
            kept = f"SELECT 1 FROM lg_checkpoints c WHERE {same.format(t='lg_writes')} AND c.checkpoint_id = lg_writes.checkpoint_id"
            tx.execute(f"DELETE FROM lg_writes WHERE {key} AND NOT EXISTS ({kept})", (self.tenant, thread_id))
            read = {
                (ns, channel, str(version))
                for ns, type_, blob in tx.execute(
                    f"SELECT checkpoint_ns, type, checkpoint FROM lg_checkpoints WHERE {key}", (self.tenant, thread_id)
                )
                for channel, version in self.serde.loads_typed((type_, blob))["channel_versions"].items()
            }
            stale = [
                row
                for row in tx.execute(f"SELECT checkpoint_ns, channel, version FROM lg_blobs WHERE {key}", (self.tenant, thread_id))
                if tuple(row) not in read
            ]
            tx.executemany(
                f"DELETE FROM lg_blobs WHERE {key} AND checkpoint_ns = ? AND channel = ? AND version = ?",
                [(self.tenant, thread_id, *row) for row in stale],
            )

    # ---- async: the sync methods in a worker thread ------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: [*self.list(config, filter=filter, before=before, limit=limit)]):
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """Monotonic string versions with a random tail (as LangGraph's own savers make them)."""
        number = 0 if current is None else current if isinstance(current, int) else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


#: the columns after (tenant, thread_id) of each table, for copying a thread
_COPIED = {
    "lg_checkpoints": "checkpoint_ns, checkpoint_id, parent_id, type, checkpoint, metadata_type, metadata, run_id, user_id",
    "lg_blobs": "checkpoint_ns, channel, version, type, blob",
    "lg_writes": "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path",
}


def _check_owner(tx: Any, tenant: str, thread_id: str, user_id: str) -> None:
    """UsageError if the thread has checkpoints put for another user: mirroring its messages into
    this user's history would mix two users' conversations."""
    other = tx.execute(
        "SELECT 1 FROM lg_checkpoints WHERE tenant = ? AND thread_id = ? AND user_id IS NOT NULL AND user_id <> ? LIMIT 1",
        (tenant, thread_id, user_id),
    )
    if other:
        raise UsageError(
            f"thread {thread_id!r} has checkpoints of another user: a thread's messages go into one user's history; use a thread id per user"
        )


def _thread(config: RunnableConfig) -> str:
    return str(config["configurable"]["thread_id"])


def _namespace(config: RunnableConfig) -> str:
    return str(config["configurable"].get("checkpoint_ns") or "")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
