"""Deletion notes through a copy (``memstack.transfer.notes``): after a copy the destination
answers ``deletions(tenant, user_id=...)`` for a forgotten user or thread as the source did, on
real SQLite and PostgreSQL stores; a rerun after a crash doubles nothing; a destination with notes
under a key of its own is refused before anything is written (or the notes are left behind on
request); a tenant whose every user was forgotten travels too; verify compares the notes."""

from __future__ import annotations

import os
import uuid

import pytest
from pgsupport import drop_schema, require_dsn

from memstack.backends.jsonl import JsonlStore
from memstack.backends.memory import MemoryStore
from memstack.backends.sqlite import SQLiteStore
from memstack.cli import main
from memstack.errors import UsageError
from memstack.transfer import copy_store, copy_tenants, verify_tenants
from memstack.transfer.copying import MARK_NAME, MARK_USER, verify
from memstack.types import Message, Scope

LI = Scope(user_id="李四", thread_id="会话一", tenant="acme")
LI_GONE = Scope(user_id="李四", thread_id="旧会话", tenant="acme")
BOB = Scope(user_id="bob", thread_id="t1", tenant="acme")
LEFT = Scope(user_id="carol", thread_id="t1", tenant="emptied")  # a tenant whose every user is forgotten


@pytest.fixture
def opened(tmp_path):
    """Fresh stores by backend name; PostgreSQL ones in their own schemas, dropped after."""
    stores, schemas = [], []

    def open_(backend: str):
        if backend == "sqlite":
            store = SQLiteStore(tmp_path / f"{uuid.uuid4().hex[:8]}.db")
        elif backend == "jsonl":
            store = JsonlStore(tmp_path / uuid.uuid4().hex[:8])
        elif backend == "memory":
            store = MemoryStore()
        else:
            from memstack.backends.postgres import PostgresStore

            dsn = require_dsn("transfer")  # skips without a server: no schema to drop then
            schemas.append(f"memstack_test_{uuid.uuid4().hex[:12]}")
            store = PostgresStore(dsn, schema=schemas[-1], max_size=2)
        stores.append(store)
        return store

    yield open_
    for store in stores:
        store.close()
    for schema in schemas:
        drop_schema(os.environ["MEMSTACK_TEST_PG_DSN"], schema)


def say(text: str, n: int = 0) -> Message:
    return Message(role="user", content=text, id=f"m-{uuid.uuid4().hex[:8]}-{n}")


def forgetful(store):
    """李四 keeps a thread and lost one, bob was forgotten; in "emptied" everyone was."""
    for scope in (LI, LI_GONE, BOB, LEFT):
        store.history.append(scope, [say("我叫李四，正在开发知识中台"), say("预算三十万", 1)])
    store.history.delete_thread(LI_GONE, layer="ui")
    store.delete_user(BOB, layer="api")
    store.delete_user(LEFT, layer="cli")
    return store


def same_answers(src, dst) -> None:
    for tenant, user in (("acme", "李四"), ("acme", "bob"), ("emptied", "carol"), ("acme", "nobody")):
        assert dst.deletions(tenant, user_id=user) == src.deletions(tenant, user_id=user), (tenant, user)


@pytest.mark.parametrize(("src_backend", "dst_backend"), [("sqlite", "postgres"), ("postgres", "sqlite"), ("memory", "jsonl")])
def test_a_copy_carries_the_notes_with_their_key(opened, src_backend, dst_backend):
    src, dst = forgetful(opened(src_backend)), opened(dst_backend)
    reports = copy_tenants(src, dst)
    assert sorted(reports) == ["acme", "emptied"]  # the tenant of notes only travels too
    assert reports["acme"].read["deletion"] == 2 and reports["emptied"].read["deletion"] == 1
    assert all(r.differences == () for r in reports.values())
    assert dst.deletion_key() == src.deletion_key() and dst.deletions("acme") == src.deletions("acme")
    same_answers(src, dst)
    [thread] = dst.deletions("acme", user_id="李四")
    assert (thread.kind, thread.layer, thread.counts) == ("thread", "ui", src.deletions("acme", user_id="李四")[0].counts)
    assert verify_tenants(src, dst) == []
    dst.history.delete_thread(LI, layer="ui")  # the destination's own notes use the adopted key
    assert [d.kind for d in dst.deletions("acme", user_id="李四")] == ["thread", "thread"]
    said = [str(d) for d in verify(src, dst, tenant="acme")]
    assert (
        "the tenant's deletion: 2 in the source, 3 in the destination" in said
        and "user '李四': message: 2 in the source, 0 in the destination" in said
    )


def test_a_rerun_after_a_crash_doubles_no_note(opened):
    src, dst = forgetful(opened("sqlite")), opened("sqlite")
    notes = src.deletions("acme")
    dst.state.put(Scope(user_id=MARK_USER, tenant="acme"), {"source": src.url}, MARK_NAME)  # killed after one note
    dst.restore_deletions(src.deletion_key(), notes[:1])
    report = copy_store(src, dst, tenant="acme")
    assert report.resumed and report.differences == ()
    assert dst.deletions("acme") == notes
    assert copy_store(src, dst, tenant="acme", into_existing=True, users=["bob"]).read["deletion"] == 1  # bob's again: no double
    assert dst.deletions("acme") == notes


def test_a_destination_with_notes_of_its_own_is_refused_before_anything_is_written(opened):
    src, dst = forgetful(opened("sqlite")), opened("postgres")
    dst.history.append(Scope(user_id="王五", thread_id="t", tenant="acme"), [say("别的库")])
    dst.history.delete_thread(Scope(user_id="王五", thread_id="t", tenant="acme"))
    dst.history.append(Scope(user_id="王五", thread_id="t2", tenant="acme"), [say("还在")])
    own, key = dst.deletions("acme"), dst.deletion_key()
    with pytest.raises(UsageError, match="cannot be re-keyed.*--no-deletions"):
        copy_tenants(src, dst, into_existing=True)
    assert dst.history.users("acme") == ["王五"] and dst.deletions("acme") == own and dst.deletion_key() == key
    assert dst.state.get(Scope(user_id=MARK_USER, tenant="acme"), MARK_NAME) is None  # not even the mark
    reports = copy_tenants(src, dst, into_existing=True, deletions=False)
    assert "deletion" not in reports["acme"].read and reports["acme"].differences == ()
    assert dst.deletions("acme") == own and dst.deletion_key() == key  # its own notes still answer
    assert sorted(reports) == ["acme"]  # a tenant of notes only has nothing else to carry
    assert [str(d) for d in verify(src, dst, tenant="acme", users=["李四"])] == [
        "the tenant's deletion: 1 in the source, 0 in the destination"
    ]


def test_a_copy_of_some_users_carries_their_notes_only(opened):
    src, dst = forgetful(opened("memory")), opened("sqlite")
    report = copy_store(src, dst, tenant="acme", users=["李四"])
    assert report.read["deletion"] == 1 and report.differences == ()
    assert dst.deletions("acme") == src.deletions("acme", user_id="李四")
    assert dst.deletions("acme", user_id="bob") == []


def test_the_cli_copies_the_notes_and_names_the_refusal(opened, tmp_path, capsys):
    src = forgetful(opened("sqlite"))
    target = tmp_path / "target.db"
    assert main(["copy", src.url, f"sqlite:///{target}"]) == 0
    said = capsys.readouterr().out
    assert "3 deletion" in said and "verify: clean" in said
    copied = SQLiteStore(target)
    try:
        same_answers(src, copied)
    finally:
        copied.close()
    other = forgetful(opened("sqlite"))  # another store: notes under another key
    assert main(["copy", src.url, other.url, "--tenant", "acme", "--into-existing", "--user", "bob"]) == 2  # bob's note
    assert "cannot be re-keyed" in capsys.readouterr().err
    assert main(["copy", src.url, other.url, "--tenant", "emptied", "--no-deletions"]) == 0
    assert main(["verify", src.url, other.url, "--tenant", "emptied", "--no-deletions"]) == 0
