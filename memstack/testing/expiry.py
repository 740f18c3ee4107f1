"""The retention contract: ``Store.expire`` deletes exactly what is older than its cutoffs, in
the one tenant, with one ``expired`` note per user; and the model-made memories that stood on
expired messages only, unless ``derived`` is off.

Subclass ``ExpiryContract`` with ``new_store`` (``StoreFixture``). A backend without model-made
memory (JSON lines) sets ``derived_memory = False``: only its messages expire.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ..errors import InvalidInput
from ..stores import Store
from ..types import Change, Expiry, Scope, UsageRecord, utcnow
from .stores import A2, AGENT, OTHER_TENANT, T0, A, B, StoreFixture, full, msg
from .units import unit

#: the cutoff of the contract's messages: those of day 0 expire, those of day 10 stay
CUTOFF = T0 + timedelta(days=5)
DAY = 24 * 60


def _texts(store: Store, scope: Scope) -> list[str]:
    return [m.text for m in store.history.read(scope)]


class ExpiryContract(StoreFixture):
    derived_memory = True

    def seed(self, store: Store) -> dict[str, list[str]]:
        """Old and new messages for two users of the default tenant (one with an agent thread),
        and for the same user id in another tenant: {"old": ids of A's expired messages, "new": A's kept}."""
        old = store.history.append(A, [msg("user", "旧：我住在北京"), msg("assistant", "好的", 1)])
        new = store.history.append(A, [msg("user", "新：我搬到上海了", 10 * DAY), msg("assistant", "记住了", 10 * DAY + 1)])
        store.history.append(A2, [msg("user", "old thread only")])
        store.history.append(AGENT, [msg("user", "agent old"), msg("user", "agent new", 10 * DAY)])
        store.history.append(B, [msg("user", "B old"), msg("user", "B new", 10 * DAY)])
        store.history.append(OTHER_TENANT, [msg("user", "acme old"), msg("user", "acme new", 10 * DAY)])
        return {"old": [m.id for m in old], "new": [m.id for m in new]}

    def test_expired_messages_go_and_nothing_else(self, store: Store) -> None:
        self.seed(store)
        notes = store.expire("default", Expiry(messages=CUTOFF))
        assert _texts(store, A) == ["新：我搬到上海了", "记住了"]
        assert _texts(store, A2) == []
        assert _texts(store, AGENT) == ["agent new"]
        assert _texts(store, B) == ["B new"]
        assert _texts(store, OTHER_TENANT) == ["acme old", "acme new"]  # another tenant: untouched
        assert [(n.kind, n.layer, dict(n.counts)) for n in notes] == [
            ("expired", "retention", {"messages": 4}),  # user_001: 2 + 1 + 1 (agent thread)
            ("expired", "retention", {"messages": 1}),  # user_002
        ]
        assert store.deletions("default", user_id="user_001") == [notes[0]]
        assert store.deletions("default", user_id="user_002") == [notes[1]]
        assert store.deletions("acme") == []
        assert all(n.target_hash is None for n in notes)  # a note names no thread, no content

    def test_a_second_pass_deletes_nothing_and_leaves_no_note(self, store: Store) -> None:
        self.seed(store)
        store.expire("default", Expiry(messages=CUTOFF))
        assert store.expire("default", Expiry(messages=CUTOFF)) == []
        assert len(store.deletions("default")) == 2

    def test_no_cutoff_keeps_everything(self, store: Store) -> None:
        self.seed(store)
        assert store.expire("default", Expiry()) == []
        assert _texts(store, A) == ["旧：我住在北京", "好的", "新：我搬到上海了", "记住了"]

    def test_bad_input_is_refused_and_deletes_nothing(self, store: Store) -> None:
        self.seed(store)
        with pytest.raises(InvalidInput):
            store.expire("default", "30d")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            store.expire("", Expiry(messages=CUTOFF))
        with pytest.raises(InvalidInput):
            Expiry(messages=CUTOFF.replace(tzinfo=None))
        assert len(_texts(store, A)) == 4

    # ---- the model-made memories ---------------------------------------------------------------

    def seed_memories(self, store: Store) -> dict[str, list[str]]:
        ids = self.seed(store)
        old, new = ids["old"], ids["new"]
        s = full(store)
        units = [
            unit("u-old", "我住在北京", A, source_ids=tuple(old)),  # stood on expired messages only
            unit("u-both", "从北京搬到上海", A, source_ids=(old[0], new[0])),  # one source stays
            unit("u-new", "我搬到上海了", A, 10 * DAY, source_ids=(new[0],)),
            unit("u-note", "用户喜欢简短的回答", A, kind="note"),  # no source: a saved memory
        ]
        s.units.put(units)
        s.vectors.upsert(units, np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6]], dtype=np.float32), model="contract")
        user = A.user()
        s.records.apply(user, [Change("put", "entity", "北京", {"name": "北京"}, source_ids=(old[0],))], layer="entity")
        s.records.apply(user, [Change("put", "entity", "上海", {"name": "上海"}, source_ids=(new[0],))], layer="entity")
        s.records.apply(user, [Change("put", "state", "city", {"value": "北京"}, source_ids=(old[0],))], layer="state")
        s.records.apply(user, [Change("put", "state", "city", {"value": "上海"}, source_ids=(new[0],))], layer="state")
        return ids

    def test_memories_that_stood_on_expired_messages_only_go_with_them(self, store: Store) -> None:
        if not self.derived_memory:
            pytest.skip("the backend keeps no model-made memory")
        self.seed_memories(store)
        s, user = full(store), A.user()
        notes = store.expire("default", Expiry(messages=CUTOFF))
        assert [u.id for u in s.units.get(user, ["u-old", "u-both", "u-new", "u-note"])] == ["u-both", "u-new", "u-note"]
        assert sorted(s.vectors.fetch(user, ["u-old", "u-both", "u-new", "u-note"])) == ["u-both", "u-new", "u-note"]
        assert [r.key for r in s.records.current(user, "entity")] == ["上海"]
        assert [r.value for r in s.records.history(user, "state", "city")] == [{"value": "上海"}]  # the old version went
        assert dict(notes[0].counts) == {"messages": 4, "memories": 2, "units": 1, "vectors": 1}

    def test_derived_keep_keeps_the_memories(self, store: Store) -> None:
        if not self.derived_memory:
            pytest.skip("the backend keeps no model-made memory")
        self.seed_memories(store)
        s, user = full(store), A.user()
        notes = store.expire("default", Expiry(messages=CUTOFF, derived=False))
        assert len(s.units.get(user, ["u-old", "u-both", "u-new", "u-note"])) == 4
        assert [r.key for r in s.records.current(user, "entity")] == ["上海", "北京"]
        assert dict(notes[0].counts) == {"messages": 4}

    def test_old_audit_events_and_model_calls_go_by_when_they_were_recorded(self, store: Store) -> None:
        if not self.derived_memory:
            pytest.skip("the backend keeps no audit trail or model calls")
        s, now = full(store), utcnow()
        for scope in (A.user(), B.user(), OTHER_TENANT.user()):
            s.records.apply(scope, [Change("put", "entity", "网球", {"name": "网球"})], layer="entity")
            s.usage.record(
                [
                    UsageRecord(scope, "entity", "m", 10, 2, 5.0, at=now - timedelta(days=100)),
                    UsageRecord(scope, "entity", "m", 7, 1, 5.0, at=now),
                ]
            )
        notes = store.expire("default", Expiry(audit=now + timedelta(seconds=1), usage=now - timedelta(days=1)))
        for scope in (A.user(), B.user()):
            assert s.records.audit(scope) == []
            assert [r.prompt_tokens for r in s.usage.read(scope)] == [7]
            assert [r.key for r in s.records.current(scope, "entity")] == ["网球"]  # a memory is no audit event
        assert len(s.records.audit(OTHER_TENANT.user())) == 1
        assert len(s.usage.read(OTHER_TENANT.user())) == 2
        assert [dict(n.counts) for n in notes] == [{"audit": 1, "usage": 1}, {"audit": 1, "usage": 1}]
