"""The differences between the two SQL dialects that shared SQL text has to know, as data.

Each backend writes most of its SQL itself; what both write alike (``sql.where``) is written once
for a ``Dialect`` and differs only in what is here: the parameter placeholder, how a list is
bound (one placeholder per value for SQLite, one array for PostgreSQL), table names (PostgreSQL's
carry ``memstack_`` before them: they share the schema with the application's own), how an
instant is held in the time columns that filters compare (SQLite: UTC microseconds in ``ts_us``;
PostgreSQL: timestamptz in ``ts``) and the value codecs of the columns both dialects write alike
(SQLite: JSON text, ISO text times and 0/1 flags; PostgreSQL: jsonb, timestamptz and booleans,
the driver converting both ways).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..rules.time import epoch_us


def _same(value: Any) -> Any:
    return value


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _from_iso(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


#: values per ``IN (...)`` list, well under SQLite's limit on bound parameters
CHUNK = 500


def chunks(values: Sequence[Any]) -> Iterator[list[Any]]:
    """The distinct values, in order, CHUNK at a time (one IN list each)."""
    unique = list(dict.fromkeys(values))
    for start in range(0, len(unique), CHUNK):
        yield unique[start : start + CHUNK]


#: one statement's rows: (sql, params) -> every row (a backend's read, in a transaction of its own)
Fetch = Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]


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
    #: the placeholder of a JSON value given as JSON text (``rules.json_values.json_text``)
    json_mark: str = "?"
    #: a JSON column's value as read back, as a Python value
    json_of: Callable[[Any], Any] = _from_json
    #: a datetime as a time column holds it, and a time column's value as a datetime (None stays None)
    time_value: Callable[[datetime | None], Any] = _iso
    time_of: Callable[[Any], Any] = _from_iso
    #: a bool as a flag column holds it
    flag: Callable[[bool], Any] = int

    def instant_column(self, name: str) -> str:
        """The column that holds the instant of time column ``name`` as filters compare it
        (``at``: SQLite's ``at_us`` beside the ISO text in ``at``, PostgreSQL's ``at`` itself)."""
        return name + self.time_column.removeprefix("ts")

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

    def groups(self, values: Sequence[Any]) -> list[list[Any]]:
        """The distinct values as the lists ``any_of`` is given one statement each: all of them
        where a list is one array parameter, else CHUNK at a time."""
        if self.arrays:
            return [list(dict.fromkeys(values))]
        return list(chunks(values))

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
POSTGRES = Dialect(
    "postgresql",
    "%s",
    "memstack_",
    True,
    "ts",
    _same,
    "SELECT 1 WHERE to_regclass(%s::text) IS NOT NULL",
    json_mark="%s::jsonb",
    json_of=_same,
    time_value=_same,
    time_of=_same,
    flag=bool,
)
