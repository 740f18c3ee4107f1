"""The in-memory unit store passes the unit contract and is safe to share between threads."""

import threading

from memstack.backends.memory import MemoryStore
from memstack.testing import A, UnitStoreContract, unit


class TestMemoryUnits(UnitStoreContract):
    def new_store(self):
        return MemoryStore()


def test_concurrent_puts_and_searches_lose_nothing():
    units = MemoryStore().units
    errors = []

    def work(w: int) -> None:
        try:
            for i in range(50):
                units.put([unit(f"w{w}-{i}", f"火锅 跑步 记录{w}")])
                units.keyword_search(A, "火锅", k=5)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(units.keyword_search(A, "火锅", k=500)) == 200
