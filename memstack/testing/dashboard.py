"""The dashboard's library calls on a Store: the tenant's users with their counts
(``memstack.views.users``) and a person's corrections (``memstack.edits``), each audited.

Subclass ``DashboardContract`` and implement ``new_store``; a backend that keeps no model-made
memory (jsonl) sets ``keeps_records = False``: its users are listed with no memories, and every
edit is a UsageError naming the backends that have them.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from .. import edits, views
from ..errors import Conflict, InvalidInput, NotFound, UsageError
from ..saved import NOTES_THREAD, note_id
from ..stores import RecordStore
from ..types import Change, Scope, Unit, UsageRecord
from .stores import OTHER_TENANT, T0, A, FullStore, StoreFixture, msg

U = A.user()
ENTITY = {"name": "李四", "type": "人物", "attributes": {"住在": {"value": "上海", "source_ids": ["m1"], "valid_from": T0.isoformat()}}}
SUMMARY = {
    "items": [
        {"text": "用户在开发知识中台", "at": T0.isoformat(), "source_ids": ["m1"]},
        {"text": "后端使用SpringBoot", "at": T0.isoformat(), "source_ids": ["m2"]},
    ]
}


class DashboardContract(StoreFixture):
    keeps_records = True

    def seed(self, store: FullStore) -> None:
        store.history.append(A, [msg("user", "我叫李四，住在上海", id="m1"), msg("assistant", "好的", id="m2")])
        store.history.append(A.user().thread("t2"), [msg("user", "后端使用SpringBoot", id="m3")])
        store.history.append(Scope(user_id="user_002", tenant=A.tenant).thread("x"), [msg("user", "hi", id="m4")])
        store.history.append(OTHER_TENANT.user().thread("x"), [msg("user", "别人的", id="m5")])
        if self.keeps_records:
            store.records.apply(
                U,
                [Change("put", "entity", "李四", ENTITY, ("m1",), T0), Change("put", "state", "city", {"value": "上海"}, ("m1",), T0)],
                layer="extract",
            )
            store.records.apply(A, [Change("put", "summary", "summary", SUMMARY, ("m1", "m2"), T0)], layer="summary")
            store.usage.record(
                [UsageRecord(scope=A, at=T0, layer="extract", model="local", prompt_tokens=100, completion_tokens=20, latency_ms=5.0)]
            )

    def test_users_of_the_tenant_with_their_counts(self, store: FullStore) -> None:
        self.seed(store)
        page, total = views.users(store, A.tenant)
        assert total == 2 and [u["user_id"] for u in page] == ["user_001", "user_002"]
        first = page[0]
        assert (first["threads"], first["messages"]) == (2, 3)
        assert first["memories"] == (2 + 2 if self.keeps_records else 0)  # an entity, a state key, two notes
        assert first["model_tokens"] == (120 if self.keeps_records else 0)
        assert first["last_at"] is not None
        other, n = views.users(store, OTHER_TENANT.tenant)
        assert n == 1 and other[0]["messages"] == 1 and other[0]["memories"] == 0  # the same id, another tenant's

    def test_users_are_searched_by_id_and_paged(self, store: FullStore) -> None:
        self.seed(store)
        assert [u["user_id"] for u in views.users(store, A.tenant, query="USER_002")[0]] == ["user_002"]
        assert views.users(store, A.tenant, query="nobody") == ([], 0)
        page, total = views.users(store, A.tenant, limit=1, offset=1)
        assert total == 2 and [u["user_id"] for u in page] == ["user_002"]
        with pytest.raises(InvalidInput):
            views.users(store, A.tenant, limit=0)

    def test_users_without_messages_are_listed_too(self, store: FullStore) -> None:
        """A user the tenant knows by model-made memory or saved memories alone (messages
        forgotten, imported notes) is listed, as the API knows them; a thread's summary alone is no user."""
        self.seed(store)
        if self.keeps_records:
            store.records.apply(
                Scope(user_id="only_state", tenant=A.tenant), [Change("put", "state", "city", {"value": "杭州"}, (), T0)], layer="ui"
            )
            store.records.apply(
                Scope(user_id="only_summary", tenant=A.tenant, thread_id="gone"),
                [Change("put", "summary", "summary", SUMMARY, (), T0)],
                layer="summary",
            )
            note = Unit(
                id=note_id("我喜欢火锅"),
                scope=Scope(user_id="only_notes", tenant=A.tenant, thread_id=NOTES_THREAD),
                text="我喜欢火锅",
                timestamp=T0,
                kind="note",
            )
            store.units.put([note])
        page, total = views.users(store, A.tenant)
        expected = ["only_notes", "only_state", "user_001", "user_002"] if self.keeps_records else ["user_001", "user_002"]
        assert [u["user_id"] for u in page] == expected and total == len(expected)
        if self.keeps_records:
            counts = {u["user_id"]: u for u in page}
            assert counts["only_state"]["memories"] == 1 and counts["only_state"]["threads"] == 0
            assert counts["only_notes"]["saved"] == 1 and counts["user_001"]["saved"] == 0
        assert views.users(store, OTHER_TENANT.tenant)[1] == 1

    def test_forgetting_is_in_the_deletion_views(self, store: FullStore) -> None:
        self.seed(store)
        store.history.delete_thread(A.user().thread("t2"), layer="ui")
        store.delete_user(Scope(user_id="user_002", tenant=A.tenant), layer="api")
        mine = views.deletions(store, A.tenant, user_id="user_001")
        assert [(d["kind"], d["layer"], d["counts"]["messages"]) for d in mine] == [("thread", "ui", 1)]
        everyone = views.deletions(store, A.tenant)
        assert [d["kind"] for d in everyone] == ["user", "thread"]  # newest first
        assert views.deletions(store, A.tenant, limit=1) == everyone[:1]
        assert "user_002" not in json.dumps(everyone) and "t2" not in json.dumps(everyone)
        assert views.deletions(store, OTHER_TENANT.tenant) == []
        with pytest.raises(InvalidInput):
            views.deletions(store, A.tenant, limit=0)

    def test_edits_need_a_backend_with_records(self, store: FullStore) -> None:
        if self.keeps_records:
            pytest.skip("this backend keeps records")
        with pytest.raises(UsageError, match="sqlite, postgresql or memory"):
            edits.set_state(store, U, "city", "杭州", editor="ui")

    def _records(self, store: FullStore) -> RecordStore:
        if not self.keeps_records:
            pytest.skip("this backend keeps no model-made memory")
        self.seed(store)
        return store.records

    def test_a_state_key_is_set_and_deleted_through_the_audit(self, store: FullStore) -> None:
        records = self._records(store)
        assert edits.set_state(store, U, "city", "杭州", editor="ui").value == {"value": "杭州"}
        edits.delete_record(store, U, "state", "city", editor="ui")
        assert records.current(U, "state") == []
        trail = [(e.layer, e.action, e.key) for e in records.audit(U, kind="state")]
        assert trail[:2] == [("ui", "delete", "city"), ("ui", "supersede", "city")]
        assert [r.value["value"] for r in records.history(U, "state", "city")] == ["上海", "杭州"]
        with pytest.raises(NotFound):
            edits.delete_record(store, U, "state", "city", editor="ui")

    def test_an_attribute_edit_supersedes_and_keeps_the_old_value_as_past(self, store: FullStore) -> None:
        records = self._records(store)
        after = edits.set_attribute(store, U, "李四", "住在", "深圳", editor="ui", at=T0 + timedelta(days=3))
        (attr,) = views.attributes(after)
        assert [c["value"] for c in attr["current"]] == ["深圳"]
        assert [(p["value"], p["until"][:10]) for p in attr["past"]] == [("上海", "2024-05-04")]
        assert after.value["name"] == "李四" and after.version == 2
        edits.set_attribute(store, U, "李四", "职业", "工程师", editor="ui")
        gone = edits.delete_attribute(store, U, "李四", "职业", editor="ui")
        assert "职业" not in gone.value["attributes"]
        assert [e.action for e in records.audit(U, kind="entity")][:3] == ["supersede", "supersede", "supersede"]
        with pytest.raises(NotFound):
            edits.delete_attribute(store, U, "李四", "职业", editor="ui")
        with pytest.raises(NotFound):
            edits.set_attribute(store, U, "王五", "住在", "北京", editor="ui")
        with pytest.raises(InvalidInput):
            edits.set_attribute(store, U, "李四", "住在", "  ", editor="ui")

    def test_a_note_is_edited_and_deleted_unless_the_summary_changed(self, store: FullStore) -> None:
        records = self._records(store)
        edited = edits.edit_note(store, A, 1, "后端改用Go", expect="后端使用SpringBoot", editor="ui")
        assert [i["text"] for i in edited.value["items"]] == ["用户在开发知识中台", "后端改用Go"]
        assert edited.value["items"][1]["source_ids"] == ["m2"]
        with pytest.raises(Conflict):
            edits.delete_note(store, A, 1, expect="后端使用SpringBoot", editor="ui")
        left = edits.delete_note(store, A, 0, expect="用户在开发知识中台", editor="ui")
        assert [i["text"] for i in left.value["items"]] == ["后端改用Go"]
        with pytest.raises(NotFound):
            edits.delete_note(store, A, 5, expect="x", editor="ui")
        assert [e.layer for e in records.audit(U, kind="summary")][:2] == ["ui", "ui"]

    def test_edits_never_reach_another_tenant(self, store: FullStore) -> None:
        self._records(store)
        theirs = OTHER_TENANT.user()
        with pytest.raises(NotFound):
            edits.set_attribute(store, theirs, "李四", "住在", "深圳", editor="ui")
        with pytest.raises(NotFound):
            edits.delete_record(store, theirs, "state", "city", editor="ui")
        assert store.records.current(U, "state")[0].value == {"value": "上海"}
