"""The differences between the two SQL dialects that shared SQL text has to know, as data.

Each backend writes most of its SQL itself; what both write alike (``sql.where``) is written once
for a ``Dialect`` and differs only in what is here: the parameter placeholder, how a list is
bound (one placeholder per value for SQLite, one array for PostgreSQL), table names (PostgreSQL's
carry ``memstack_`` before them: they share the schema with the application's own) and how an
instant is held in the time columns that filters compare (SQLite: UTC microseconds in ``ts_us``;
PostgreSQL: timestamptz in ``ts``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..rules.time import epoch_us


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    #: the DB-API placeholder
    mark: str
    #: what every table name starts with
    prefix: str
    #: a list is bound as one array parameter (``= ANY(%s)``), not one placeholder per value
    arrays: bool
    #: the column an instant is filtered on, and a datetime as that column holds it
    time_column: str
    instant: Callable[[datetime], Any]
    #: a query with one parameter, a table name, returning a row when the table exists
    table_exists: str

    def table(self, name: str) -> str:
        """The name of one of memstack's tables in this dialect (``units``: ``memstack_units``)."""
        return self.prefix + name

    def marks(self, n: int) -> str:
        return ", ".join([self.mark] * n)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, and its parameters."""
        if self.arrays:
            return f"{column} = ANY({self.mark})", [list(values)]
        return f"{column} IN ({self.marks(len(values))})", list(values)

    @property
    def user(self) -> str:
        """The condition on a user's rows: (tenant, user_id)."""
        return f"tenant = {self.mark} AND user_id = {self.mark}"

    @property
    def key(self) -> str:
        """The condition on a scope's exact key: (tenant, user_id, agent_id, thread_id)."""
        return f"{self.user} AND agent_id = {self.mark} AND thread_id = {self.mark}"


SQLITE = Dialect("sqlite", "?", "", False, "ts_us", epoch_us, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")

#: (to_regclass: the store's schema is the connection's search_path)
POSTGRES = Dialect("postgresql", "%s", "memstack_", True, "ts", lambda value: value, "SELECT 1 WHERE to_regclass(%s::text) IS NOT NULL")
