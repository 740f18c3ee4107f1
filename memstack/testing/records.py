"""The RecordStore and UsageLog contracts: versioned records with an audit trail, and model calls.

Subclass a contract in a pytest module and implement ``new_store`` (a fresh, empty Store whose
``records`` and ``usage`` are under test; ``close()`` is called after each test); durable
backends also set ``durable = True`` and implement ``reopen`` (close, then open the same
location, as a restarted process would)::

    class TestMyRecords(RecordStoreContract):
        durable = True
        def new_store(self): ...
        def reopen(self, store): ...

The rules checked are those of ``memstack.backends.memory_records`` (the reference): a put adds,
supersedes or (same value) merges source ids silently; a delete retires; records live at exactly
the scope's key (agent and thread included); audit and usage are read per user.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..errors import InvalidInput
from ..stores import RecordStore, UsageLog
from ..types import Change, Scope, UsageRecord, user_digest
from .stores import A2, AGENT, OTHER_TENANT, T0, A, B, FullStore, StoreFixture, full, msg, present

U = A.user()  # user_001's user level
LIKES = {"name": "李四", "likes": ["火锅", "跑步"], "city": "北京"}


def put(key: str, value: dict[str, Any], *, kind: str = "entity", minutes: int | None = 0, sources: tuple[str, ...] = ("m1",)) -> Change:
    at = T0 + timedelta(minutes=minutes) if minutes is not None else None
    return Change("put", kind, key, value, source_ids=sources, at=at)


def delete(key: str, *, kind: str = "entity", minutes: int | None = 0) -> Change:
    return Change("delete", kind, key, at=T0 + timedelta(minutes=minutes) if minutes is not None else None)


def usage(scope: Scope, minutes: int, **kw: Any) -> UsageRecord:
    fields: dict[str, Any] = {
        "layer": "summary",
        "model": "qwen2.5:7b",
        "prompt_tokens": 1200,
        "completion_tokens": 80,
        "latency_ms": 950.5,
    }
    return UsageRecord(scope=scope, at=T0 + timedelta(minutes=minutes), **{**fields, **kw})


class RecordStoreContract(StoreFixture):
    """Behaviour every RecordStore (reached as ``store.records``) must show."""

    @pytest.fixture
    def records(self, store: FullStore) -> RecordStore:
        return store.records

    # ---- add, supersede, no-op, delete ---------------------------------------------------------

    def test_it_is_a_record_store(self, records: RecordStore) -> None:
        assert isinstance(records, RecordStore)

    def test_a_new_key_is_added_as_version_one(self, records: RecordStore) -> None:
        (event,) = records.apply(U, [put("李四", LIKES, sources=("m1", "m2"))], layer="entities")
        assert (event.action, event.kind, event.key, event.layer) == ("add", "entity", "李四", "entities")
        assert event.before is None and event.after == LIKES and event.source_ids == ("m1", "m2") and event.scope == U
        assert event.at.utcoffset() == timedelta(0)
        (record,) = records.current(U, "entity")
        assert (record.key, record.value, record.version, record.source_ids, record.scope) == ("李四", LIKES, 1, ("m1", "m2"), U)
        assert record.valid_from == T0 and record.invalid_at is None and record.current
        assert record.created_at.utcoffset() == timedelta(0)

    def test_a_new_value_supersedes_the_current_one(self, records: RecordStore) -> None:
        records.apply(U, [put("李四", {"city": "北京"}, minutes=0)], layer="entities")
        (event,) = records.apply(U, [put("李四", {"city": "上海"}, minutes=30, sources=("m9",))], layer="entities")
        assert (event.action, event.before, event.after, event.source_ids) == ("supersede", {"city": "北京"}, {"city": "上海"}, ("m9",))
        old, new = records.history(U, "entity", "李四")
        assert (old.version, old.value, old.invalid_at) == (1, {"city": "北京"}, T0 + timedelta(minutes=30))
        assert (new.version, new.value, new.valid_from, new.invalid_at) == (2, {"city": "上海"}, T0 + timedelta(minutes=30), None)
        assert old.id != new.id
        assert [r.value for r in records.current(U, "entity")] == [{"city": "上海"}]

    def test_the_same_value_again_is_a_no_op_that_merges_source_ids(self, records: RecordStore) -> None:
        records.apply(U, [put("李四", {"city": "北京", "age": 30}, sources=("m1", "m2"))], layer="entities")
        assert records.apply(U, [put("李四", {"age": 30, "city": "北京"}, minutes=5, sources=("m2", "m3", "m1"))], layer="entities") == []
        (record,) = records.current(U, "entity")
        assert record.source_ids == ("m1", "m2", "m3") and record.version == 1 and record.valid_from == T0
        assert len(records.history(U, "entity", "李四")) == 1
        assert len(records.audit(U)) == 1

    def test_values_compare_as_json(self, records: RecordStore) -> None:
        records.apply(U, [put("k", {"n": 1, "flag": True})], layer="l")
        assert records.apply(U, [put("k", {"flag": True, "n": 1.0})], layer="l") == []
        (event,) = records.apply(U, [put("k", {"n": 1, "flag": 1})], layer="l")
        assert event.action == "supersede"

    def test_delete_retires_the_current_record(self, records: RecordStore) -> None:
        records.apply(U, [put("李四", LIKES)], layer="entities")
        (event,) = records.apply(U, [delete("李四", minutes=10)], layer="forget")
        assert (event.action, event.before, event.after, event.layer) == ("delete", LIKES, None, "forget")
        assert records.current(U, "entity") == []
        (old,) = records.history(U, "entity", "李四")
        assert old.invalid_at == T0 + timedelta(minutes=10) and not old.current

    def test_deleting_what_is_not_there_is_a_no_op(self, records: RecordStore) -> None:
        assert records.apply(U, [delete("nobody")], layer="forget") == []
        records.apply(U, [put("李四", LIKES), delete("李四")], layer="l")
        assert records.apply(U, [delete("李四")], layer="forget") == []
        assert [e.action for e in records.audit(U)] == ["delete", "add"]

    def test_a_key_put_after_a_delete_continues_its_versions(self, records: RecordStore) -> None:
        records.apply(U, [put("李四", {"v": 1}, minutes=0), delete("李四", minutes=1)], layer="l")
        (event,) = records.apply(U, [put("李四", {"v": 1}, minutes=2)], layer="l")
        assert event.action == "add" and event.before is None
        assert [(r.version, r.current) for r in records.history(U, "entity", "李四")] == [(1, False), (2, True)]

    def test_a_change_without_a_time_has_no_valid_from(self, records: RecordStore) -> None:
        before = datetime.now(timezone.utc)
        records.apply(U, [put("k", {"v": 1}, minutes=None)], layer="l")
        records.apply(U, [put("k", {"v": 2}, minutes=None)], layer="l")
        old, new = records.history(U, "entity", "k")
        assert old.valid_from is None and new.valid_from is None
        assert old.invalid_at is not None and old.invalid_at >= before - timedelta(seconds=1)

    def test_changes_to_one_key_in_one_batch_apply_in_order(self, records: RecordStore) -> None:
        events = records.apply(
            U, [put("k", {"v": 1}, minutes=0), put("k", {"v": 2}, minutes=1), put("k", {"v": 2}, minutes=2, sources=("m7",))], layer="l"
        )
        assert [e.action for e in events] == ["add", "supersede"]
        assert [(r.version, r.value) for r in records.history(U, "entity", "k")] == [(1, {"v": 1}), (2, {"v": 2})]
        assert records.current(U, "entity")[0].source_ids == ("m1", "m7")

    def test_an_empty_batch_does_nothing(self, records: RecordStore) -> None:
        assert records.apply(U, [], layer="l") == []
        assert records.audit(U) == []

    def test_a_batch_with_a_bad_change_applies_nothing(self, records: RecordStore) -> None:
        with pytest.raises(InvalidInput):
            records.apply(U, [put("good", {"v": 1}), put("bad", {"v": {1, 2}})], layer="l")
        with pytest.raises(InvalidInput):
            records.apply(U, [put("good", {"v": 1}), Change("put", "entity", "naive", {"v": 1}, at=datetime(2024, 5, 1, 9, 0))], layer="l")
        with pytest.raises(InvalidInput):
            records.apply(U, [put("good", {"v": 1}), put("nan", {"v": float("nan")})], layer="l")
        assert records.current(U, "entity") == [] and records.audit(U) == []

    def test_invalid_kinds_layers_and_changes_are_refused(self, records: RecordStore) -> None:
        with pytest.raises(InvalidInput):
            Change("put", "fact", "k", {"v": 1})
        with pytest.raises(InvalidInput):
            Change("upsert", "entity", "k", {"v": 1})
        with pytest.raises(InvalidInput):
            Change("put", "entity", "k")
        for call in (
            lambda: records.current(U, "fact"),
            lambda: records.history(U, "fact", "k"),
            lambda: records.audit(U, kind="fact"),
            lambda: records.delete(U, "fact"),
            lambda: records.apply(U, [put("k", {"v": 1})], layer=""),
            lambda: records.apply(U, [{"action": "put", "kind": "entity", "key": "k", "value": {}}], layer="l"),  # type: ignore[list-item]  # not a Change
            lambda: records.audit(U, limit=-1),
        ):
            with pytest.raises(InvalidInput):
                call()

    # ---- reading ---------------------------------------------------------------------------------

    def test_current_is_ordered_by_key_and_can_pick_keys(self, records: RecordStore) -> None:
        records.apply(U, [put(k, {"k": k}) for k in ("王五", "bob", "Alice", "张三")], layer="l")
        assert [r.key for r in records.current(U, "entity")] == sorted(["王五", "bob", "Alice", "张三"])
        assert [r.key for r in records.current(U, "entity", ["张三", "bob", "nobody"])] == ["bob", "张三"]
        assert records.current(U, "entity", []) == []

    def test_kinds_are_separate(self, records: RecordStore) -> None:
        records.apply(U, [put("x", {"as": "entity"}), put("x", {"as": "state"}, kind="state")], layer="l")
        assert [r.value for r in records.current(U, "entity")] == [{"as": "entity"}]
        assert [r.value for r in records.current(U, "state")] == [{"as": "state"}]
        assert records.current(U, "relation") == []

    def test_history_is_oldest_first(self, records: RecordStore) -> None:
        for i in range(4):
            records.apply(U, [put("k", {"v": i}, minutes=i)], layer="l")
        versions = records.history(U, "entity", "k")
        assert [(r.version, r.value["v"]) for r in versions] == [(1, 0), (2, 1), (3, 2), (4, 3)]
        assert [r.current for r in versions] == [False, False, False, True]
        assert records.history(U, "entity", "nobody") == []

    def test_thread_and_user_level_are_separate(self, records: RecordStore) -> None:
        records.apply(A, [put("summary", {"text": "聊了火锅"}, kind="summary")], layer="summary")
        records.apply(U, [put("李四", LIKES)], layer="entities")
        assert [r.scope for r in records.current(A, "summary")] == [A]
        assert records.current(U, "summary") == [] and records.current(A2, "summary") == []
        assert records.current(A, "entity") == []

    def test_audit_covers_the_user_newest_first(self, records: RecordStore) -> None:
        records.apply(A, [put("summary", {"text": "一"}, kind="summary")], layer="summary")
        records.apply(U, [put("李四", LIKES)], layer="entities")
        records.apply(A2, [put("summary", {"text": "二"}, kind="summary")], layer="summary")
        records.apply(U, [put("李四", {"city": "上海"}, minutes=5)], layer="entities")
        expected = [("supersede", U), ("add", A2), ("add", U), ("add", A)]
        for scope in (U, A, A2):
            assert [(e.action, e.scope) for e in records.audit(scope)] == expected
        assert [e.scope for e in records.audit(U, kind="summary")] == [A2, A]
        assert [e.action for e in records.audit(U, limit=2)] == ["supersede", "add"]
        assert [e.kind for e in records.audit(U, kind="entity", limit=1)] == ["entity"]
        assert records.audit(U, limit=0) == []

    def test_returned_values_are_copies(self, records: RecordStore) -> None:
        (event,) = records.apply(U, [put("李四", {"likes": ["火锅"]})], layer="l")
        present(event.after)["likes"].append("changed")
        records.current(U, "entity")[0].value["likes"].append("changed")
        records.history(U, "entity", "李四")[0].value["likes"].append("changed")
        present(records.audit(U)[0].after)["likes"].append("changed")
        assert records.current(U, "entity")[0].value == {"likes": ["火锅"]}
        assert records.audit(U)[0].after == {"likes": ["火锅"]}

    def test_chinese_and_other_text_round_trip(self, records: RecordStore) -> None:
        value = {
            "名字": "李四",
            "备注": "喜欢吃火锅🌶，不吃香菜",
            "quote": 'say "hi"\n\ttab',
            "nested": {"列表": ["一", 2, 3.5, None, True]},
        }
        records.apply(U, [put("李四 (Li Si)", value, sources=("消息-1",))], layer="实体")
        (record,) = records.current(U, "entity")
        assert (record.key, record.value, record.source_ids) == ("李四 (Li Si)", value, ("消息-1",))
        (event,) = records.audit(U)
        assert (event.layer, event.after) == ("实体", value)

    # ---- isolation -------------------------------------------------------------------------------

    def test_users_tenants_and_agents_with_the_same_keys_stay_apart(self, records: RecordStore) -> None:
        scopes = [A, B, OTHER_TENANT, AGENT]
        for i, scope in enumerate(scopes):
            records.apply(scope.user(), [put("李四", {"owner": i})], layer="l")
            records.apply(scope, [put("summary", {"owner": i}, kind="summary")], layer="l")
        for i, scope in enumerate(scopes):
            assert [r.value for r in records.current(scope.user(), "entity")] == [{"owner": i}]
            assert [r.value for r in records.current(scope, "summary")] == [{"owner": i}]
            assert [r.value for r in records.history(scope.user(), "entity", "李四")] == [{"owner": i}]
        for scope in (B, OTHER_TENANT, AGENT):
            assert {present(e.after)["owner"] for e in records.audit(scope)} == {scopes.index(scope)}
        assert {present(e.after)["owner"] for e in records.audit(U)} == {0, 3}  # no agent named: every agent of the user
        assert records.current(Scope(user_id="user_00"), "entity") == [] and records.audit(Scope(user_id="user_0011")) == []

    # ---- deleting --------------------------------------------------------------------------------

    def test_delete_by_scope_level_and_kind_keeps_the_audit_trail(self, records: RecordStore) -> None:
        records.apply(U, [put("李四", {"v": 1}), put("李四", {"v": 2}, minutes=1), put("k", {"v": 1}, kind="state")], layer="l")
        records.apply(A, [put("summary", {"text": "一"}, kind="summary")], layer="summary")
        records.apply(AGENT.user(), [put("李四", {"v": 1})], layer="l")
        assert records.delete(U, "entity") == 2  # both versions
        assert records.current(U, "entity") == [] and records.history(U, "entity", "李四") == []
        assert [r.key for r in records.current(U, "state")] == ["k"]
        assert len(records.current(A, "summary")) == 1 and len(records.current(AGENT.user(), "entity")) == 1
        assert records.delete(A) == 1 and records.current(A, "summary") == []
        assert records.delete(U) == 1 and records.current(U, "state") == []
        assert records.delete(U) == 0
        assert len(records.audit(U)) == 5

    def test_the_users_with_current_records(self, store: FullStore) -> None:
        store.records.apply(U, [put("李四", LIKES)], layer="entities")
        store.records.apply(B, [put("summary", {"text": "二"}, kind="summary")], layer="summary")
        store.records.apply(OTHER_TENANT.user(), [put("李四", LIKES)], layer="entities")
        store.records.apply(
            Scope(user_id="user_003"),
            [put("王五", LIKES), Change("delete", "entity", "王五", at=T0 + timedelta(minutes=1))],
            layer="entities",
        )
        assert store.records.users("default") == ["user_001", "user_002"]  # user_003's only record was deleted
        assert store.records.users("acme") == ["user_001"] and store.records.users("nobody") == []

    def test_delete_thread_removes_the_threads_records_audit_and_usage(self, store: FullStore) -> None:
        store.records.apply(A, [put("summary", {"text": "一"}, kind="summary")], layer="summary")
        store.records.apply(A2, [put("summary", {"text": "二"}, kind="summary")], layer="summary")
        store.records.apply(U, [put("李四", LIKES)], layer="entities")
        store.usage.record([usage(A, 0), usage(A2, 1), usage(U, 2)])
        store.history.append(A, [msg("user", "你好")])
        store.history.delete_thread(A, layer="ui")
        (note,) = store.deletions("default")
        assert (note.kind, note.layer, note.counts) == ("thread", "ui", {"messages": 1, "memories": 1, "audit": 1, "usage": 1})
        assert store.records.current(A, "summary") == []
        assert [(e.scope, e.key) for e in store.records.audit(U)] == [(U, "李四"), (A2, "summary")]
        assert [r.scope for r in store.usage.read(U)] == [A2, U]
        assert len(store.records.current(A2, "summary")) == 1 and len(store.records.current(U, "entity")) == 1

    def test_delete_user_removes_records_audit_and_usage_and_notes_the_deletion(self, store: FullStore) -> None:
        victims = [A, AGENT]
        survivors = [B, OTHER_TENANT, Scope(user_id="user_0011", thread_id="t1")]
        for scope in victims + survivors:
            store.records.apply(scope, [put("summary", {"text": "秘密"}, kind="summary")], layer="summary")
            store.records.apply(scope.user(), [put("李四", LIKES)], layer="entities")
            store.usage.record([usage(scope, 0), usage(scope.user(), 1)])
        deleted = store.delete_user(A)
        assert deleted == 12  # 2 records, 2 events and 2 usage rows for each victim
        for scope in victims:
            assert store.records.current(scope, "summary") == [] and store.records.current(scope.user(), "entity") == []
            assert store.records.history(scope.user(), "entity", "李四") == []
            assert store.records.audit(scope) == [] and store.usage.read(scope) == []
        for scope in survivors:
            assert len(store.records.current(scope, "summary")) == 1 and len(store.records.current(scope.user(), "entity")) == 1
            assert len(store.records.audit(scope)) == 2 and len(store.usage.read(scope)) == 2
        (note,) = store.deletions("default")
        assert (note.tenant, note.kind, note.rows, note.target_hash, note.layer) == ("default", "user", deleted, None, "library")
        assert note.counts == {"memories": 4, "audit": 4, "usage": 4}  # what went, by what it was: no content, not even the id
        assert re.fullmatch("[0-9a-f]{64}", note.user_hash) and note.user_hash != user_digest("user_001")  # keyed, not a bare sha256
        assert note.at.utcoffset() is not None
        assert "user_001" not in repr(note) and "秘密" not in repr(note)
        assert store.deletions("acme") == []
        assert store.delete_user(A) == 0
        assert [d.rows for d in store.deletions("default")] == [deleted, 0]

    def test_a_deletion_note_hashes_the_user_id_with_the_stores_own_key(self, store: FullStore) -> None:
        """The note's user_hash is a keyed hash (backends.deletions): not the id's sha256, which
        hashing guesses of the id (user_001, an email address) would find, yet the same for one
        user in every deletion of the store, and different for another id or another tenant."""
        for scope in (A, B, AGENT, OTHER_TENANT):
            store.delete_user(scope)
        first, other, again = (d.user_hash for d in store.deletions("default"))
        assert first == again != other  # AGENT is user_001 again
        assert user_digest(A.user_id) not in (first, other) and user_digest(B.user_id) not in (first, other)
        (elsewhere,) = store.deletions("acme")
        assert elsewhere.user_hash not in (first, other)  # user_001 of another tenant: another user

    # ---- a store's whole record, carried verbatim (memstack.transfer) --------------------------

    def test_dump_and_restore_carry_every_version_verbatim_once(self, store: FullStore) -> None:
        store.records.apply(U, [put("李四", {"city": "北京"}, minutes=0), put("李四", {"city": "上海"}, minutes=5)], layer="entities")
        store.records.apply(A, [put("summary", {"text": "聊了火锅"}, kind="summary"), delete("李四")], layer="summary")
        store.records.apply(A2, [put("王五", {"city": "深圳"})], layer="entities")
        store.records.apply(B, [put("赵六", {"city": "杭州"})], layer="entities")  # another user: not in U's dump
        records, events = store.records.dump(U)
        assert len(records) == 4 and len(events) == 4  # two versions of 李四, the summary, 王五 (another agent)
        assert {r.scope.user_id for r in records} == {U.user_id}
        assert [r.version for r in records if r.key == "李四"] == [1, 2] and records[0].invalid_at is not None
        before = (store.records.history(U, "entity", "李四"), store.records.current(A, "summary"), store.records.audit(U))
        store.delete_user(U)  # the same store emptied of the user stands in for a new one (a file backend reopens its file)
        assert store.records.restore(records, events) == 8
        assert store.records.restore(records, events) == 0  # held ids are skipped: a rerun adds nothing
        assert (store.records.history(U, "entity", "李四"), store.records.current(A, "summary"), store.records.audit(U)) == before
        assert sorted(store.records.dump(U)[0], key=lambda r: r.id) == sorted(records, key=lambda r: r.id)
        assert len(store.records.dump(B.user())[0]) == 1
        (event,) = store.records.apply(U, [put("李四", {"city": "深圳"}, minutes=9)], layer="entities")
        assert event.action == "supersede" and store.records.history(U, "entity", "李四")[-1].version == 3

    # ---- durability ------------------------------------------------------------------------------

    def test_reopen_keeps_everything(self, store: FullStore) -> None:
        if not self.durable:
            pytest.skip("not a durable backend")
        store.records.apply(U, [put("李四", {"city": "北京"}, minutes=0), put("李四", {"city": "上海"}, minutes=5)], layer="entities")
        store.records.apply(A, [put("summary", {"text": "聊了火锅"}, kind="summary")], layer="summary")
        store.usage.record([usage(A, 0, ok=False, error="输出不是JSON")])
        store.delete_user(B)
        hashes = [d.user_hash for d in store.deletions("default")]
        before = (
            store.records.history(U, "entity", "李四"),
            store.records.current(A, "summary"),
            store.records.audit(U),
            store.usage.read(U),
        )
        reopened = full(self.reopen(store))
        try:
            after = (
                reopened.records.history(U, "entity", "李四"),
                reopened.records.current(A, "summary"),
                reopened.records.audit(U),
                reopened.usage.read(U),
            )
            assert after == before
            assert [d.user_hash for d in reopened.deletions("default")] == hashes  # the store's key is kept in the store
            reopened.delete_user(B)
            assert [d.user_hash for d in reopened.deletions("default")] == hashes * 2
            (event,) = reopened.records.apply(U, [put("李四", {"city": "深圳"}, minutes=9)], layer="entities")
            assert event.action == "supersede" and reopened.records.history(U, "entity", "李四")[-1].version == 3
        finally:
            reopened.close()


class UsageLogContract(StoreFixture):
    """Behaviour every UsageLog (reached as ``store.usage``) must show."""

    @pytest.fixture
    def log(self, store: FullStore) -> UsageLog:
        return store.usage

    def test_it_is_a_usage_log(self, log: UsageLog) -> None:
        assert isinstance(log, UsageLog)

    def test_rows_round_trip_oldest_first(self, log: UsageLog) -> None:
        failed = usage(
            A, 5, ok=False, error="模型输出不是合法JSON", layer="entities", prompt_tokens=0, completion_tokens=0, latency_ms=30000.0
        )
        log.record([usage(A, 9), failed, usage(A, 1)])
        got = log.read(A)
        assert [r.at for r in got] == [T0 + timedelta(minutes=m) for m in (1, 5, 9)]
        assert got[1] == failed  # the same instant, whatever zone it comes back in
        assert got[0].ok is True and got[0].error is None and got[0].at.utcoffset() == timedelta(0)
        assert (got[0].prompt_tokens, got[0].completion_tokens, got[0].latency_ms, got[0].model) == (1200, 80, 950.5, "qwen2.5:7b")

    def test_rows_at_the_same_time_keep_their_order(self, log: UsageLog) -> None:
        log.record([usage(A, 0, model="first"), usage(A, 0, model="second")])
        log.record([usage(A, 0, model="third")])
        assert [r.model for r in log.read(A)] == ["first", "second", "third"]

    def test_read_covers_the_users_threads_and_since_is_inclusive(self, log: UsageLog) -> None:
        log.record([usage(A, 0), usage(A2, 1), usage(U, 2), usage(B, 3)])
        assert [r.scope for r in log.read(A2)] == [A, A2, U]
        assert [r.scope for r in log.read(U, since=T0 + timedelta(minutes=1))] == [A2, U]
        assert log.read(U, since=T0 + timedelta(minutes=2, seconds=1)) == []

    def test_users_tenants_and_agents_stay_apart(self, log: UsageLog) -> None:
        log.record([usage(A, 0), usage(B, 1), usage(OTHER_TENANT, 2), usage(AGENT, 3)])
        assert [r.scope for r in log.read(B)] == [B]
        assert [r.scope for r in log.read(OTHER_TENANT)] == [OTHER_TENANT]
        assert [r.scope for r in log.read(AGENT)] == [AGENT]
        assert [r.scope for r in log.read(U)] == [A, AGENT]  # no agent named: every agent of the user
        assert log.read(Scope(user_id="user_00")) == []

    def test_bad_rows_are_refused_and_nothing_is_logged(self, log: UsageLog) -> None:
        naive = UsageRecord(A, "summary", "m", 1, 1, 1.0, at=datetime(2024, 5, 1, 9, 0))
        for rows in ([usage(A, 0), naive], [usage(A, 0), {"layer": "summary"}], [usage(A, 0, layer="")]):
            with pytest.raises(InvalidInput):
                log.record(rows)  # type: ignore[arg-type]  # rows that are no UsageRecords, on purpose
        with pytest.raises(InvalidInput):
            log.read(A, since=datetime(2024, 5, 1))
        assert log.read(A) == []
        log.record([])
        assert log.read(A) == []

    def test_totals_sum_a_tenants_calls_per_user_and_layer_in_a_range(self, log: UsageLog) -> None:
        log.record([usage(A, 0), usage(A2, 1, layer="entities"), usage(A, 2), usage(B, 3), usage(OTHER_TENANT, 2), usage(AGENT, 4)])
        got = log.totals("default")
        assert [(t.user_id, t.layer, t.calls, t.tokens) for t in got] == [
            ("user_001", "entities", 1, 1280),
            ("user_001", "summary", 3, 3 * 1280),  # A twice and the agent's: a user's calls, every agent
            ("user_002", "summary", 1, 1280),
        ]
        # since is inclusive, until exclusive; one user only
        ranged = log.totals("default", since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=3), user_id="user_001")
        assert [(t.user_id, t.layer, t.calls) for t in ranged] == [("user_001", "entities", 1), ("user_001", "summary", 1)]
        assert [t.calls for t in log.totals("acme")] == [1] and log.totals("nobody") == []
        with pytest.raises(InvalidInput):
            log.totals("default", since=datetime(2024, 5, 1))

    def test_reopen_keeps_the_log(self, store: FullStore) -> None:
        if not self.durable:
            pytest.skip("not a durable backend")
        store.usage.record([usage(A, 0), usage(U, 1, ok=False, error="超时")])
        before = store.usage.read(U)
        reopened = full(self.reopen(store))
        try:
            assert reopened.usage.read(U) == before
        finally:
            reopened.close()
