"""The PostgreSQL unit store passes the unit contract and keeps its index in step with its units.

Needs a server: set MEMSTACK_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5433/postgres, as
printed by scripts/postgres.sh). Without it the module is skipped, except under CI, where a
missing server is a failure. Every test works in a fresh random schema, dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta, timezone

import pytest
from pgsupport import require_dsn

from memstack.errors import InvalidInput
from memstack.testing import T0, A, B, UnitStoreContract, unit
from memstack.types import Unit

DSN = require_dsn("unit store")

psycopg = pytest.importorskip("psycopg")
from memstack.backends.postgres import MIGRATIONS, PostgresStore, quote_identifier  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(DSN, schema=schema)
    yield store
    store.close()


class TestPostgresUnits(UnitStoreContract):
    @pytest.fixture(autouse=True)
    def fresh_schema(self, schema: str) -> None:
        self.schema = schema

    def new_store(self) -> PostgresStore:
        return PostgresStore(DSN, schema=self.schema)


def index_rows(schema: str) -> tuple[int, int]:
    with psycopg.connect(DSN) as conn:
        terms = conn.execute(f"SELECT count(*) FROM {quote_identifier(schema)}.memstack_unit_terms").fetchone()
        owners = conn.execute(f"SELECT count(*) FROM {quote_identifier(schema)}.memstack_unit_owners").fetchone()
    return terms[0], owners[0]


def test_deleting_units_leaves_no_postings_or_owner_rows(pg: PostgresStore, schema: str) -> None:
    pg.units.put([unit("a", "我平时喜欢跑步"), unit("b", "跑步 跑步", B)])
    pg.units.put([unit("a", "改成游泳了")])
    assert index_rows(schema) == (2 + 1, 2)
    pg.delete_user(A)
    assert index_rows(schema) == (1, 1)
    pg.history.delete_thread(B)
    assert index_rows(schema) == (0, 0)


def test_the_timestamp_keeps_its_offset(pg: PostgresStore) -> None:
    west = T0.astimezone(timezone(timedelta(hours=-5, minutes=-30)))
    pg.units.put([Unit(id="a", scope=A, text="跑步", timestamp=west)])
    (got,) = pg.units.get(A, ["a"])
    assert got.timestamp == west and got.timestamp.utcoffset() == timedelta(hours=-5, minutes=-30)


def test_text_postgresql_cannot_store_is_invalid_input_and_stores_nothing(pg: PostgresStore) -> None:
    with pytest.raises(InvalidInput):
        pg.units.put([unit("ok", "跑步"), Unit(id="bad", scope=A, text="nul \x00 byte", timestamp=T0)])
    assert pg.units.get(A, ["ok", "bad"]) == []


def test_a_schema_from_before_units_gains_them(schema: str) -> None:
    name, initial = MIGRATIONS[0]
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {quote_identifier(schema)}")
        conn.execute(f"SET search_path = {quote_identifier(schema)}")
        conn.execute(initial)
        conn.execute("CREATE TABLE memstack_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        conn.execute("INSERT INTO memstack_migrations (name) VALUES (%s)", (name,))
    store = PostgresStore(DSN, schema=schema)
    try:
        store.units.put([unit("a", "我平时喜欢跑步")])
        assert [s.id for s in store.units.keyword_search(A, "跑步", k=5)] == ["a"]
    finally:
        store.close()
