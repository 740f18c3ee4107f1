"""The SQLite record store and usage log pass their contracts, keep one current version per key
and reach databases made before them."""

import multiprocessing
import sqlite3

import pytest

from memstack.backends.rules.deletions import user_hash
from memstack.backends.sqlite import MIGRATIONS, SQLiteStore, apply_migrations
from memstack.errors import StoreError
from memstack.testing import A, RecordStoreContract, UsageLogContract, msg
from memstack.testing.records import U, put, usage
from memstack.types import user_digest


class _SQLite:
    durable = True

    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)

    def reopen(self, store):
        store.close()
        return SQLiteStore(self.path)


class TestSQLiteRecords(_SQLite, RecordStoreContract):
    pass


class TestSQLiteUsage(_SQLite, UsageLogContract):
    pass


def test_chinese_is_stored_as_text_not_escapes(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    store.records.apply(U, [put("李四", {"城市": "北京"})], layer="实体")
    assert store.query("SELECT value FROM records")[0][0] == '{"城市": "北京"}'
    assert '"城市": "北京"' in store.query("SELECT after FROM record_audit")[0][0]
    store.close()


def test_the_database_refuses_a_second_current_version(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    store.records.apply(U, [put("李四", {"v": 1})], layer="l")
    with pytest.raises(StoreError), store.write() as db:
        db.execute(
            "INSERT INTO records (tenant, user_id, agent_id, thread_id, kind, key, version, id, value, source_ids, created) "
            "SELECT tenant, user_id, agent_id, thread_id, kind, key, version + 1, 'x', value, source_ids, created FROM records"
        )
    store.close()


def test_a_deletion_leaves_only_its_note(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    store.history.append(A, [msg("user", "我叫李四")])
    store.records.apply(U, [put("李四", {"城市": "北京"})], layer="l")
    store.usage.record([usage(A, 0)])
    store.delete_user(A)
    for table in ("records", "record_audit", "model_usage"):
        assert store.query(f"SELECT count(*) FROM {table}")[0][0] == 0
    ((secret,),) = store.query("SELECT secret FROM deletion_key")
    assert store.query("SELECT tenant, user_hash, rows_deleted FROM deletions") == [
        ("default", user_hash(secret, "default", "user_001"), 4)
    ]
    store.close()


def test_the_deletion_key_is_the_stores_own(tmp_path):
    """Two stores hash one user id differently: a note says nothing outside its store."""
    hashes = []
    for name in ("one.db", "two.db"):
        store = SQLiteStore(tmp_path / name)
        assert store.query("SELECT count(*) FROM deletion_key") == [(0,)]  # made on first use
        store.delete_user(A)
        store.delete_user(A)
        hashes.append([d.user_hash for d in store.deletions("default")])
        store.close()
    (one, again), (two, _) = hashes
    assert one == again != two and user_digest("user_001") not in (one, two)


def test_the_notes_of_a_database_from_before_the_key_are_rehashed(tmp_path):
    """A note written as a bare sha256 (before 008_deletion_key) is rehashed under the new key:
    no unsalted digest is left, and the user hashes as it does in a note written afterwards."""
    names = [name for name, _ in MIGRATIONS]
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    apply_migrations(db, MIGRATIONS[: names.index("008_deletion_key")])
    db.execute(
        "INSERT INTO deletions (tenant, user_hash, at, rows_deleted) VALUES ('default', ?, '2026-11-02T12:00:00+00:00', 4)",
        (user_digest("user_001"),),
    )
    db.close()
    store = SQLiteStore(tmp_path / "old.db")
    store.delete_user(A)
    old, new = (d.user_hash for d in store.deletions("default"))
    ((secret,),) = store.query("SELECT secret FROM deletion_key")
    assert old == new == user_hash(secret, "default", "user_001") != user_digest("user_001")
    store.close()


def test_the_notes_of_a_database_from_before_009_read_as_users_of_unknown_counts(tmp_path):
    """Before 009_deletion_notes a note was a user's, with its rows only: it reads back as a user's
    deletion by an unknown layer, found among that user's notes, beside the new ones."""
    names = [name for name, _ in MIGRATIONS]
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    apply_migrations(db, MIGRATIONS[: names.index("009_deletion_notes")])
    db.execute("INSERT INTO deletion_key (id, secret) VALUES (1, ?)", (b"k" * 32,))
    db.execute(
        "INSERT INTO deletions (tenant, user_hash, at, rows_deleted) VALUES ('default', ?, '2026-11-02T12:00:00+00:00', 4)",
        (user_hash(b"k" * 32, "default", "user_001"),),
    )
    db.close()
    store = SQLiteStore(tmp_path / "old.db")
    store.history.append(A, [msg("user", "你好")])
    store.history.delete_thread(A, layer="ui")
    old, new = store.deletions("default", user_id="user_001")
    assert (old.kind, old.rows, old.counts, old.layer, old.target_hash) == ("user", 4, {}, None, None)
    assert (new.kind, new.counts, new.layer) == ("thread", {"messages": 1}, "ui")
    store.close()


def test_a_database_from_before_records_gains_them(tmp_path):
    names = [name for name, _ in MIGRATIONS]
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    apply_migrations(db, MIGRATIONS[: names.index("004_records")])
    db.close()
    store = SQLiteStore(tmp_path / "old.db")
    store.records.apply(U, [put("李四", {"v": 1})], layer="l")
    store.usage.record([usage(A, 0)])
    store.delete_user(A)
    ((secret,),) = store.query("SELECT secret FROM deletion_key")
    assert [d.user_hash for d in store.deletions("default")] == [user_hash(secret, "default", "user_001")]
    store.close()


def _apply_many(path: str, worker: int, n: int) -> None:
    store = SQLiteStore(path)
    for i in range(n):
        store.records.apply(U, [put("李四", {"writer": worker, "i": i})], layer="l")
    store.close()


def test_four_processes_write_one_key(tmp_path):
    path = str(tmp_path / "shared.db")
    SQLiteStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_apply_many, args=(path, w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    store = SQLiteStore(path)
    versions = store.records.history(U, "entity", "李四")
    assert [r.version for r in versions] == list(range(1, 101))
    assert [r.current for r in versions].count(True) == 1
    store.close()
