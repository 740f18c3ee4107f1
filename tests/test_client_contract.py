"""The shipped Memory contract (``memstack.testing.memory``) run through ``Client``: each test's
Memory is served by a real server (uvicorn in a thread, its own API key for the test's tenant)
and the test talks to it over HTTP. The few tests of what the REST API does
not offer (a conditional add, the caller's own job runner and worker thread) are replaced by what
the client does instead, or skipped saying why. (AsyncClient runs the same steps, only awaited:
tests/test_client.py runs it through the scripted conversation and the dropped connection; the
suite is not run twice, to spare CI half a minute of servers.)"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from memstack import Client, Memory  # noqa: E402
from memstack.backends.memory import MemoryStore  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import MemoryContract, ScriptedModel  # noqa: E402
from memstack.testing.memory import LISI, add_all  # noqa: E402


class Served:
    """A Memory over ``store`` behind a real server, its tenant's API key the one the client holds."""

    def __init__(self, store: Any, **options: Any) -> None:
        self.memory = Memory(store, **options)
        self.key = f"key-{self.memory.tenant}"
        app = create_app(
            self.memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys={self.key: self.memory.tenant}, worker=False)
        )
        self.server = BackgroundServer(app).start()

    def stop(self) -> None:
        self.server.stop()
        self.memory.close()


class ServedClient(Client):
    """A Client of its own server; ``store`` is the served store (the contract opens another
    tenant on it), ``close`` stops the server too."""

    def __init__(self, store: Any, **options: Any) -> None:
        self.served = Served(store, **options)
        self.store = self.served.memory.store
        super().__init__(self.served.server.url, api_key=self.served.key)

    def close(self) -> None:
        super().close()
        self.served.stop()


class TestClientContract(MemoryContract):
    def new_store(self) -> Any:
        return MemoryStore()

    def open_memory(self, store: Any, **options: Any) -> Any:
        return ServedClient(store, **options)

    def test_a_conditional_add_stores_only_on_the_tail_it_read(self, mem: Any) -> None:
        """The REST API adds without a condition: the client refuses expect_last and stores nothing."""
        with pytest.raises(InvalidInput) as refused:
            mem.add("第一条", user_id="u", thread_id="t", expect_last=None)
        assert refused.value.field == "expect_last" and mem.history(user_id="u", thread_id="t") == []

    def test_concurrent_conditional_adds_on_one_tail_store_one(self) -> None:
        pytest.skip("the REST API has no conditional add (the proxy's resend matching uses it in the server)")

    def test_add_queues_the_index_and_flush_runs_it(self, make: Any) -> None:
        """As Memory's, with the client's flush (the server runs the user's jobs) for run_jobs."""
        m = make(layers="window,retrieval")
        add_all(m, LISI)
        assert m.pending(user_id="user_001") == 1 and m.search("知识中台", user_id="user_001") == []
        report = m.flush(user_id="user_001")
        assert (report.ran, report.failed) == (1, 0) and m.pending(user_id="user_001") == 0
        assert "知识中台" in m.search("知识中台用什么后端", user_id="user_001")[0].unit.text
        m.add("我的数据库是PostgreSQL", user_id="user_001", thread_id="s2")
        assert m.pending(user_id="user_001") == 1 and m.flush(user_id="user_001").ran == 1
        assert any("PostgreSQL" in h.unit.text for h in m.search("数据库", user_id="user_001"))

    def test_forget_thread_and_user_across_tenants(self, make: Any) -> None:
        """As Memory's; forgetting the user also deletes the answer the server kept for each of the
        user's adds (their Idempotency-Key), and counts it: 6 messages, 6 answers."""
        default = make(layers=["full"])
        acme = make(store=default.store, layers=["full"], tenant=f"{default.tenant}-acme")
        add_all(default, LISI, thread="s1")
        add_all(default, LISI, thread="s2")
        add_all(acme, LISI, thread="s1")
        add_all(default, LISI, user="user_002")
        assert default.forget(user_id="user_001", thread_id="s1") == 6
        assert [t.thread_id for t in default.threads(user_id="user_001")] == ["s2"]
        assert default.forget(user_id="user_001") == 12
        assert default.threads(user_id="user_001") == [] and default.forget(user_id="user_001") == 0
        assert len(acme.history(user_id="user_001", thread_id="s1")) == 6
        assert len(default.history(user_id="user_002", thread_id="s1")) == 6

    def test_the_background_worker_drains_the_queue(self) -> None:
        pytest.skip("the server runs its worker itself (memstack serve, memstack worker): a client starts none")
