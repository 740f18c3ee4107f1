"""The in-memory record store and usage log pass their contracts and are safe to share between threads."""

import threading

from memstack.backends.memory import MemoryStore
from memstack.testing import A, RecordStoreContract, UsageLogContract
from memstack.testing.records import U, put
from memstack.types import user_digest


class TestMemoryRecords(RecordStoreContract):
    def new_store(self):
        return MemoryStore()


class TestMemoryUsage(UsageLogContract):
    def new_store(self):
        return MemoryStore()


def test_the_deletion_key_is_the_stores_own():
    """Two stores hash one user id differently (each its own key); one store, the same."""
    hashes = []
    for store in (MemoryStore(), MemoryStore()):
        store.delete_user(A)
        store.delete_user(A)
        hashes.append([d.user_hash for d in store.deletions("default")])
    (one, again), (two, _) = hashes
    assert one == again != two and user_digest("user_001") not in (one, two)


def test_concurrent_applies_to_one_key_keep_one_current_version():
    records = MemoryStore().records
    errors = []

    def work(w: int) -> None:
        try:
            for i in range(50):
                records.apply(U, [put("李四", {"writer": w, "i": i})], layer="l")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = records.history(U, "entity", "李四")
    assert [r.version for r in versions] == list(range(1, 201))
    assert [r.current for r in versions].count(True) == 1 and len(records.audit(U)) == 200
