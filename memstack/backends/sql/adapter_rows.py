"""The framework adapters' rows as a user's deletion reaches them: LangGraph checkpoints (``lg_*``).

The LangGraph checkpointer (``memstack.integrations.langgraph_saver``) keeps its tables in the
store's own database and tags each checkpoint with the ``user_id`` of the config it was put
under. Forgetting a user (``Memory.forget``, ``memstack forget``, ``DELETE /v1/users/{user}``, in
any process) must reach them, and the core never imports the integrations; so the deletion rule
lives here, under the backends, and each backend runs it in its own delete transaction:

- a user: every thread (all its namespaces, checkpoints, blobs and pending writes) with a
  checkpoint tagged with the user, in the tenant;
- a thread (``Memory.forget(user_id=..., thread_id=...)``): that thread's rows, when one of its
  checkpoints is tagged with the user (a thread never tagged with the user is left alone).

Nothing happens in a database without the tables (a process that never used the adapters).
A ``memory://`` store has no SQL database of its own: the adapters keep their tables in a
private in-process SQLite database per store object (``memory.side``), reached the same way.

The caller passes its transaction's runner (``db.execute`` of a sqlite3 connection, ``cur.execute``
of a psycopg cursor: both return the cursor) and its ``Dialect``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...types import Scope
from .dialect import Dialect

#: the checkpointer's tables, the ones that hold a thread's rows (checkpoints last: it is the one
#: the user's threads are selected from)
CHECKPOINT_TABLES = ("lg_blobs", "lg_writes", "lg_checkpoints")

#: a statement runner of one transaction: (sql, params) -> a DB-API cursor
Run = Callable[[str, Sequence[Any]], Any]


def delete_checkpoints(run: Run, d: Dialect, scope: Scope, *, thread_id: str | None = None) -> int:
    """Delete the user's LangGraph threads (or the one thread) in ``run``'s transaction; rows deleted."""
    if run(d.table_exists, ("lg_checkpoints",)).fetchone() is None:
        return 0
    threads = f"SELECT thread_id FROM lg_checkpoints WHERE tenant = {d.mark} AND user_id = {d.mark}"
    params: tuple = (scope.tenant, scope.user_id)
    if thread_id is not None:
        threads += f" AND thread_id = {d.mark}"
        params += (thread_id,)
    deleted = 0
    for table in CHECKPOINT_TABLES:
        cur = run(f"DELETE FROM {table} WHERE tenant = {d.mark} AND thread_id IN ({threads})", (scope.tenant, *params))
        deleted += max(cur.rowcount, 0)
    return deleted
