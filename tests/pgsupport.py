"""PostgreSQL test support: the server's DSN (skip without one, fail under CI) and fresh schemas.

Set MEMSTACK_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5433/postgres, as printed by
scripts/postgres.sh). Every test works in a fresh random schema, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest


def require_dsn(what: str) -> str:
    """The DSN, or skip the calling module (a failure under CI, which must run these tests)."""
    dsn = os.environ.get("MEMSTACK_TEST_PG_DSN", "")
    if not dsn:
        if os.environ.get("CI"):
            pytest.fail("MEMSTACK_TEST_PG_DSN is not set; CI must run the PostgreSQL tests (see scripts/postgres.sh)", pytrace=False)
        pytest.skip(f"set MEMSTACK_TEST_PG_DSN to run the PostgreSQL {what} tests", allow_module_level=True)
    return dsn


def drop_schema(dsn: str, name: str) -> None:
    import psycopg

    from memstack.backends.postgres import quote_identifier

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_identifier(name)} CASCADE")


@pytest.fixture
def schema() -> Iterator[str]:
    """A fresh schema name, dropped (with everything in it) after the test."""
    name = f"memstack_test_{uuid.uuid4().hex[:12]}"
    yield name
    if os.environ.get("MEMSTACK_TEST_PG_DSN"):  # a test skipped without a server made no schema
        drop_schema(os.environ["MEMSTACK_TEST_PG_DSN"], name)
