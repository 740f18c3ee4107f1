"""``memstack copy``, ``verify``, ``export --all`` and ``import`` as a user runs them: a real
process on real SQLite files (a copy killed with SIGKILL, then run again), the full export and
import of a user with every kind of record, a refused destination, and tenant scoping."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta

import pytest
from transfer_support import NOW, context_texts, fill, open_memory

from memstack.backends.sqlite import SQLiteStore
from memstack.cli import main
from memstack.transfer.copying import verify
from memstack.transfer.digest import digests
from memstack.transfer.source import users
from memstack.types import Message, Scope


def memstack(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "memstack", *args], capture_output=True, text=True, env=env, timeout=120)
    if check is not None and proc.returncode != check:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A SQLite file with every layer populated for two users of "acme" and one of "other"."""
    path = tmp_path_factory.mktemp("source") / "memstack.db"
    store = SQLiteStore(path)
    fill(store)
    fill(store, tenant="other", users=("user_001",))
    store.close()
    return path


def test_export_all_then_import_gives_identical_records_and_contexts(filled, tmp_path, capsys):
    assert main(["--db", str(filled), "--tenant", "acme", "export", "--all", "--user", "user_001"]) == 0
    text = capsys.readouterr().out
    header, *items = [json.loads(line) for line in text.splitlines()]
    assert header == {"format": "memstack-export", "version": 2, "tenant": "acme", "users": ["user_001"]}
    kinds = {item["type"] for item in items}
    assert kinds == {"profile", "message", "checkpoint", "job", "state", "record", "audit", "usage", "unit", "vector"}
    assert {item["user_id"] for item in items if item["type"] != "profile"} == {"user_001"}
    export = tmp_path / "user_001.jsonl"
    export.write_text(text, encoding="utf-8")
    target = tmp_path / "target.db"
    assert main(["--db", str(target), "--tenant", "acme", "--json", "import", str(export)]) == 0
    stored = json.loads(capsys.readouterr().out)["imported"]
    assert stored["message"] == 17 and stored["record"] > 10 and stored["vector"] == stored["unit"]
    assert main(["--db", str(target), "--tenant", "acme", "--json", "import", str(export)]) == 0  # again: nothing doubled
    assert set(json.loads(capsys.readouterr().out)["imported"].values()) == {0}
    src, dst = SQLiteStore(filled), SQLiteStore(target)
    try:
        assert verify(src, dst, tenant="acme", users=["user_001"], src_index=src.vectors, dst_index=dst.vectors, deletions=False) == []
        [left] = verify(src, dst, tenant="acme", users=["user_001"], src_index=src.vectors, dst_index=dst.vectors)
        assert str(left) == "the tenant's deletion: 1 in the source, 0 in the destination"  # an export leaves the notes behind
        assert context_texts(open_memory(dst)) == context_texts(open_memory(src))
    finally:
        src.close()
        dst.close()


def test_an_export_of_a_newer_version_or_no_header_is_refused(filled, tmp_path, capsys):
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "memstack-export", "version": 99, "tenant": "acme", "users": []}) + "\n", encoding="utf-8")
    assert main(["--db", str(tmp_path / "x.db"), "import", str(newer)]) == 2
    assert "version 99 is newer" in capsys.readouterr().err
    # the messages-only export of before stays what it was, and imports as before
    assert main(["--db", str(filled), "--tenant", "acme", "export", "--user", "user_001"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert "format" not in first and first["thread_id"] == "s1" and "role" in first
    assert main(["--db", str(filled), "--tenant", "acme", "export"]) == 2
    assert "--user (or --all)" in capsys.readouterr().err


def _pile(path, *, users_: int = 3, threads: int = 3, messages: int = 200) -> int:
    """A store with many plain messages (no layers), quickly; returns how many."""
    store = SQLiteStore(path)
    for u in range(users_):
        for t in range(threads):
            scope = Scope(user_id=f"u{u}", thread_id=f"t{t}", tenant="acme")
            store.history.append(
                scope,
                [Message(role="user", content=f"第{i}条：用户{u}的消息", timestamp=NOW + timedelta(seconds=i)) for i in range(messages)],
            )
    store.close()
    return users_ * threads * messages


def test_a_copy_killed_with_sigkill_is_finished_by_running_it_again(tmp_path):
    total = _pile(tmp_path / "a.db")
    src, dst = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    # a pipe of one page: the copy blocks writing its progress until it is read, so it is still
    # copying when it is killed (F_SETPIPE_SZ, Linux)
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    command = [sys.executable, "-m", "memstack", "--tenant", "acme", "copy", src, dst, "--batch", "10"]
    proc = subprocess.Popen(command, stderr=write_end, text=True, env=env)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as progress:
        lines = [progress.readline() for _ in range(12)]  # plain lines when piped: one per batch
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL and all(line.startswith("copied 10 message items") for line in lines)
    partial = SQLiteStore(tmp_path / "b.db")
    try:
        copied = sum(
            len(partial.history.read(Scope(user_id=u, thread_id=t.thread_id, tenant="acme")))
            for u in users(partial, "acme")
            for t in partial.history.threads(Scope(user_id=u, tenant="acme"))
        )
    finally:
        partial.close()
    assert 120 <= copied < total
    assert "resumed" in memstack("--tenant", "acme", "copy", src, dst).stdout
    assert memstack("--tenant", "acme", "verify", src, dst).stdout.strip() == "verify: clean"
    a, b = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    try:
        assert digests(a, "acme", ["u0", "u1", "u2"]) == digests(b, "acme", ["u0", "u1", "u2"])
        thread = Scope(user_id="u0", thread_id="t0", tenant="acme")  # in order, once each (seq is the store's own)
        assert [replace(m, seq=None) for m in b.history.read(thread)] == [replace(m, seq=None) for m in a.history.read(thread)]
    finally:
        a.close()
        b.close()


def test_a_non_empty_destination_is_refused_unless_into_existing_without_collisions(filled, tmp_path):
    _pile(tmp_path / "mine.db", users_=1, threads=1, messages=3)  # the destination has user u0 of acme
    dst = f"sqlite:///{tmp_path / 'mine.db'}"
    before = SQLiteStore(tmp_path / "mine.db")
    held = digests(before, "acme", ["u0"])
    before.close()
    refused = memstack("--tenant", "acme", "copy", str(filled), dst, check=2)
    assert "the destination is not empty" in refused.stderr and "--into-existing" in refused.stderr
    _pile(tmp_path / "clash.db", users_=1, threads=1, messages=3)
    clash = memstack("--tenant", "acme", "copy", f"sqlite:///{tmp_path / 'clash.db'}", dst, "--into-existing", check=2)
    assert "user 'u0' exists in both stores" in clash.stderr
    assert "verify: clean" in memstack("--tenant", "acme", "copy", str(filled), dst, "--into-existing").stdout
    after = SQLiteStore(tmp_path / "mine.db")
    try:
        assert digests(after, "acme", ["u0"])["u0"] == held["u0"]  # what was there is untouched
        assert users(after, "acme") == ["u0", "user_001", "用户二"]
    finally:
        after.close()


def test_a_copy_of_one_tenant_never_touches_another(filled, tmp_path):
    dst_path = tmp_path / "dst.db"
    fill(SQLiteStore(dst_path), tenant="other", users=("user_009",))  # "other" in the destination already
    before = SQLiteStore(dst_path)
    held = digests(before, "other", ["user_009"])
    before.close()
    refused = memstack("--tenant", "acme", "copy", str(filled), f"sqlite:///{dst_path}", check=2).stderr
    assert "deletion notes under a key of its own" in refused  # "other"'s notes: the keys differ
    out = memstack("--tenant", "acme", "copy", str(filled), f"sqlite:///{dst_path}", "--no-deletions").stdout
    assert out.startswith("copied 2 users") and "verify: clean" in out
    dst = SQLiteStore(dst_path)
    try:
        assert users(dst, "other") == ["user_009"] and digests(dst, "other", ["user_009"]) == held
    finally:
        dst.close()


def test_verify_names_the_user_and_the_kind_that_differ(filled, tmp_path):
    dst_path = tmp_path / "dst.db"
    memstack("--tenant", "acme", "copy", str(filled), f"sqlite:///{dst_path}", "--user", "user_001")
    dst = SQLiteStore(dst_path)
    dst.usage.record(dst.usage.read(Scope(user_id="user_001", tenant="acme"))[:1])
    dst.close()
    proc = memstack("--tenant", "acme", "verify", str(filled), f"sqlite:///{dst_path}", check=1)
    assert "user 'user_001': usage: 2 in the source, 3 in the destination" in proc.stderr
    assert "user '用户二': message: 17 in the source, 0 in the destination" in proc.stderr


def test_without_a_tenant_copy_and_verify_take_every_tenant(filled, tmp_path):
    dst_path = tmp_path / "whole.db"
    out = memstack("copy", str(filled), f"sqlite:///{dst_path}").stdout
    assert out.startswith("copied 3 users of 2 tenants") and "verify: clean" in out, out
    src, dst = SQLiteStore(filled), SQLiteStore(dst_path)
    try:
        assert dst.tenants() == src.tenants() == ["acme", "other"]
        for tenant in ("acme", "other"):
            assert verify(src, dst, tenant=tenant, src_index=src.vectors, dst_index=dst.vectors) == []
            assert dst.profiles.get(tenant) == src.profiles.get(tenant)
        dst.usage.record(dst.usage.read(Scope(user_id="user_001", tenant="other"))[:1])
    finally:
        src.close()
        dst.close()
    assert memstack("verify", str(filled), f"sqlite:///{dst_path}", check=1).stderr.count("tenant 'other': user 'user_001': usage") == 1
    again = memstack("copy", str(filled), f"sqlite:///{dst_path}", check=2)  # every tenant is refused before anything is written
    assert "the destination is not empty" in again.stderr


def test_verify_and_copy_refuse_a_source_that_is_not_there_instead_of_creating_it(tmp_path, capsys):
    missing = tmp_path / "unset-home" / "memstack.db"
    for command in ("verify", "copy"):
        assert main([command, f"sqlite:///{missing}", f"sqlite:///{tmp_path / 'dst.db'}"]) == 1
        assert "no store at" in capsys.readouterr().err
    assert not missing.exists() and not missing.parent.exists()
