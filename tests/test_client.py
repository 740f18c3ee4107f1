"""memstack.Client and AsyncClient against a real server (uvicorn in a thread, on a loopback port):
the same scripted conversation through Memory in-process and through each client gives identical
contexts, search results and records; a retried add whose connection broke after the server
committed is stored once; the service's errors are the library's error tree; open_memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from importlib import resources
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from transfer_support import EXTRACTION, LAYERS  # noqa: E402

from memstack import AsyncClient, Client, Memory, open_memory  # noqa: E402
from memstack.client.errors import error_from  # noqa: E402
from memstack.errors import (  # noqa: E402
    BudgetError,
    Conflict,
    InvalidInput,
    MissingDependency,
    NotFound,
    ProviderUnavailable,
    RuntimeFailure,
    StoreError,
    Unauthorized,
    Unavailable,
    UnknownName,
    UsageError,
)
from memstack.profile import ProfileMismatch  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402
from memstack.types import Message  # noqa: E402

KEYS = {"key-acme": "acme", "key-globex": "globex"}
USER = "李四"
T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
QUESTIONS = [
    ("s3", "知识中台的后端用什么？预算多少？", {"max_tokens": 800}),
    ("s2", "我叫什么名字？", {"strategy": "window", "k": 2}),
    ("s1", "What cache does the platform use?", {"strategy": ["summary-buffer", "retrieval"], "max_tokens": 300, "counter": "cl100k_base"}),
    ("s3", "项目什么时候上线？", {"preset": "personal-assistant", "max_tokens": None}),
]


def new_memory() -> Memory:
    """The scripted stack of the transfer tests: summaries, entities, a graph, state and retrieval,
    every model call answered by the same extraction."""
    return Memory(
        "memory://",
        tenant="acme",
        layers=list(LAYERS),
        options={"model": ScriptedModel([], default=EXTRACTION), "batch_messages": 4, "buffer_tokens": 60},
    )


def conversation() -> list[tuple[str, dict]]:
    """The demo's two Chinese sessions, each message with a fixed id (so both stores hold the same
    ids), and an English turn."""
    lines = resources.files("memstack").joinpath("data/demo_zh.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        out.append((record.pop("thread_id"), {**record, "id": f"m{i:02d}"}))
    out.append(
        ("s2", {"role": "user", "content": "We cache with Redis, by the way.", "id": "m-en", "timestamp": "2026-11-09T21:40:00+08:00"})
    )
    return out


@pytest.fixture(scope="module")
def service():
    """A real server over its own store, tenants by API key, the write queue run by flush."""
    memory = new_memory()
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys=KEYS, worker=False))
    with BackgroundServer(app) as server:
        yield SimpleNamespace(app=app, memory=memory, url=server.url)


@pytest.fixture
def client(service):
    with Client(service.url, api_key="key-acme") as c:
        yield c


def replay(memory, user: str = USER) -> list[list[dict]]:
    """Add the conversation one message at a time, then run the write queue; what each add stored."""
    stored = [[m.to_dict() for m in memory.add(message, user_id=user, thread_id=thread)] for thread, message in conversation()]
    assert memory.flush(user_id=user).failed == 0
    return stored


def observe(memory, user: str = USER) -> dict:
    """Everything a program reads back: contexts, searches, records, threads, history, export."""
    out: dict = {
        "contexts": [
            memory.context(user_id=user, thread_id=t, query=q, at=T0 + timedelta(days=30), **kw).to_dict() for t, q, kw in QUESTIONS
        ],
        "search": [
            [
                (h.unit.id, round(h.score, 6), h.unit.text, h.unit.kind, h.unit.scope.thread_id, h.unit.source_ids, dict(h.ranks))
                for h in hits
            ]
            for hits in (
                memory.search("知识中台的预算", user_id=user, at=T0 + timedelta(days=30)),
                memory.search("Redis", user_id=user, k=2),
            )
        ],
        "threads": memory.threads(user_id=user),
        "history": [m.to_dict() for m in memory.history(user_id=user, thread_id="s1")],
        "last2": [m.to_dict() for m in memory.history(user_id=user, thread_id="s2", last=2, order="append")],
        "export": list(memory.export(user_id=user)),
    }
    for kind, thread in (("entity", None), ("relation", None), ("state", None), ("summary", "s1")):
        out[kind] = [
            (r.scope, r.kind, r.key, r.value, r.source_ids, r.valid_from, r.version)
            for r in memory.memories(kind, user_id=user, thread_id=thread)
        ]
    # (an audit event's time is when it was recorded: the two stores' differ)
    out["audit"] = [(e.layer, e.kind, e.key, e.action, e.before, e.after, e.source_ids) for e in memory.audit(user_id=user)]
    return out


def test_the_client_reads_and_writes_what_memory_does_in_process(service, client):
    """The contract: one scripted conversation through Memory and through Client gives identical
    stored messages, contexts (to_openai, sections, dropped), search hits, records and threads."""
    local = new_memory()
    assert replay(client) == replay(local)
    through, here = observe(client), observe(local)
    assert through["contexts"][0]["sections"]["memory"] > 0 and through["search"][0] and through["entity"] and through["summary"]
    assert "SpringBoot" in through["contexts"][0]["messages"][0]["content"]
    for key in here:
        assert through[key] == here[key], key
    ids = [r.id for r in service.memory.memories("entity", user_id=USER, tenant="acme")]  # a store's own record ids
    assert [r.id for r in client.memories("entity", user_id=USER)] == ids and all(ids)
    ctx = client.context(user_id=USER, thread_id="s2", query="我叫什么名字？", strategy="window", k=2)
    assert [m.role for m in ctx.messages][-1] == "user" and ctx.to_openai()[-1] == {"role": "user", "content": "我叫什么名字？"}
    assert ctx.dropped and ctx.dropped[0].layer == "window"


def test_the_async_client_reads_and_writes_what_memory_does_in_process():
    """The same conversation through AsyncClient, against a server of its own."""
    memory = new_memory()
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys=KEYS, worker=False))

    async def run(url: str) -> tuple[list, dict]:
        async with AsyncClient(url, api_key="key-acme") as c:
            stored = [[m.to_dict() for m in await c.add(msg, user_id=USER, thread_id=t)] for t, msg in conversation()]
            assert (await c.flush(user_id=USER)).failed == 0
            at = T0 + timedelta(days=30)
            seen = {
                "contexts": [(await c.context(user_id=USER, thread_id=t, query=q, at=at, **kw)).to_dict() for t, q, kw in QUESTIONS],
                "hits": [(h.unit.id, round(h.score, 6), h.unit.text) for h in await c.search("知识中台的预算", user_id=USER, at=at)],
                "entity": [(r.key, r.value, r.version) for r in await c.memories("entity", user_id=USER)],
                "export": [r async for r in c.export(user_id=USER)],
                "tenant": await c.tenant(),
            }
            return stored, seen

    local = new_memory()
    with BackgroundServer(app) as server:
        stored, seen = asyncio.run(run(server.url))
    assert stored == replay(local)
    here = observe(local)
    assert seen["contexts"] == here["contexts"] and seen["export"] == here["export"] and seen["tenant"] == "acme"
    assert seen["hits"] == [h[:3] for h in here["search"][0]] and seen["entity"] == [(e[2], e[3], e[6]) for e in here["entity"]]


def test_state_edits_tools_and_forgetting_through_the_client(service, client):
    user = "王五"
    client.add([{"role": "user", "content": "我在杭州工作"}, {"role": "assistant", "content": "好的"}], user_id=user, thread_id="t1")
    record = client.set_state("城市", "杭州", user_id=user)
    assert (record.kind, record.key, record.value) == ("state", "城市", {"value": "杭州"}) and record.scope.tenant == "acme"
    assert client.get_state(user_id=user) == {"城市": "杭州"} and client.get_state(user_id=user, key="城市") == "杭州"
    assert client.get_state(user_id=user, key="没有") is None and client.get_state(user_id="nobody") == {}
    assert [r.value for r in client.memories("state", user_id=user)] == [{"value": "杭州"}]
    assert client.delete_memory("state", "城市", user_id=user) == 1
    with pytest.raises(NotFound) as gone:
        client.delete_memory("state", "城市", user_id=user)
    assert (gone.value.code, gone.value.field) == ("record_not_found", "key")
    assert {t["function"]["name"] for t in client.openai_tools()} >= {"save_memory", "recall_memory", "forget_memory"}
    saved = client.call_tool("save_memory", {"content": "我喜欢在早上跑步"}, user_id=user, thread_id="t1")
    memory_id = saved.split()[2].rstrip(":")
    assert "跑步" in client.call_tool("recall_memory", {"query": "我喜欢什么运动？"}, user_id=user)
    assert client.call_tool("no_such_tool", {}, user_id=user).startswith("error")
    tools = client.tools(user, "t1", form="key-value")  # memory_tools(...)'s interface, for a tool-calling loop
    assert [t["function"]["name"] for t in tools.openai_tools()] == list(tools.NAMES)
    assert tools.call("save_memory", '{"key": "项目", "value": "知识中台"}').startswith("saved memory")
    assert tools.call("recall_memory", '{"key": "项目"}') == "知识中台"
    assert tools.call("recall_memory", "{not json").startswith("error: invalid arguments for recall_memory")
    assert client.forget_saved(tools.call("save_memory", {"key": "临时", "value": "x"}).split()[2], user_id=user).text == "临时: x"
    note = client.forget_saved(memory_id, user_id=user)
    assert (note.id, note.text, note.kind) == (memory_id, "我喜欢在早上跑步", "note")
    with pytest.raises(InvalidInput) as again:
        client.forget_saved(memory_id, user_id=user)
    assert again.value.field == "memory_id"
    waiting = client.pending(user_id=user)
    assert waiting > 0 and client.flush(user_id=user).ran == waiting and client.pending(user_id=user) == 0
    assert client.forget(user_id=user, thread_id="t1") == 2 and client.forget(user_id=user, thread_id="t1") == 0
    assert client.history(user_id=user, thread_id="t1") == [] and client.threads(user_id=user) == []
    assert any(d["kind"] == "thread" for d in client.deletions(user_id=user))
    assert client.retention()["tenant"] == "acme" and client.health()["status"] == "ok"


def test_the_services_errors_are_the_library_error_tree(service, client):
    with pytest.raises(InvalidInput) as bad:
        client.add([{"role": "user", "content": "好"}, {"role": "user", "content": "  "}], user_id="u", thread_id="t")
    assert bad.value.field == "messages[1].content" and bad.value.code == "invalid_input"
    assert client.history(user_id="u", thread_id="t") == []  # nothing of the batch was written
    with pytest.raises(InvalidInput, match="user_id"):
        client.add("hi", user_id="", thread_id="t")
    with pytest.raises(InvalidInput, match="timezone"):
        client.context(user_id="u", thread_id="t", at=datetime(2026, 1, 1))
    with pytest.raises(InvalidInput) as options:
        client.context(user_id="u", thread_id="t", share=0.5)
    assert options.value.field == "share"
    with pytest.raises(InvalidInput) as tenant:
        client.threads(user_id="u", tenant="globex")
    assert tenant.value.field == "tenant"
    client.add({"role": "system", "content": "你是助手。" * 50}, user_id="u", thread_id="sys")
    with pytest.raises(BudgetError):
        client.context(user_id="u", thread_id="sys", max_tokens=20)
    with pytest.raises(InvalidInput) as large:
        client.add("大" * 400_000, user_id="u", thread_id="t")  # 1.2 MB: over the server's body limit
    assert (large.value.code, large.value.field) == ("body_too_large", "body")
    with pytest.raises(NotFound):
        client.set_attribute("nobody", "城市", "杭州", user_id=USER)
    replay(client, "赵六")
    note = client.memories("summary", user_id="赵六", thread_id="s1")[0].value["items"][0]["text"]
    with pytest.raises(Conflict):
        client.edit_note(0, "改写", expect=note + "（旧）", user_id="赵六", thread_id="s1")
    assert client.edit_note(0, "改写", expect=note, user_id="赵六", thread_id="s1").value["items"][0]["text"] == "改写"
    with Client(service.url, api_key="wrong") as stranger, pytest.raises(Unauthorized):
        stranger.threads(user_id=USER)
    with Client(service.url) as keyless, pytest.raises(Unauthorized):
        keyless.context(user_id=USER, thread_id="s1")
    with Client(service.url, api_key="key-globex") as globex:  # another tenant's user of the same id: none
        assert globex.threads(user_id="赵六") == [] and globex.forget(user_id="赵六") == 0 and globex.tenant == "globex"
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with Client(f"http://127.0.0.1:{port}", retries=1) as nowhere, pytest.raises(Unavailable) as refused:
        nowhere.threads(user_id="u")
    assert isinstance(refused.value, StoreError) and "2 tries" in str(refused.value)


class Relay:
    """A TCP relay between a client and the server that, for the next ``drops`` adds (``POST
    .../messages``), forwards the request and then closes the client's connection as soon as the
    server's answer starts, without passing it on: the server committed, the client saw nothing."""

    def __init__(self, upstream: str, drops: int, path: bytes = b"/messages ") -> None:
        self.upstream = httpx.URL(upstream)
        self.drops = drops
        self.path = path
        self.dropped = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((self.upstream.host, self.upstream.port))
            doomed = threading.Event()
            threading.Thread(target=self._requests, args=(downstream, upstream, doomed), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, downstream, doomed), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket, doomed: threading.Event) -> None:
        while data := _recv(source):
            line = data.split(b"\r\n", 1)[0]
            if line.startswith(b"POST ") and self.path in line and self.drops > 0:
                self.drops -= 1
                doomed.set()
            try:
                sink.sendall(data)
            except OSError:
                break
        _hang_up(sink)

    def _answers(self, source: socket.socket, sink: socket.socket, doomed: threading.Event) -> None:
        while data := _recv(source):
            if doomed.is_set():  # the server has answered the add: hang up on the client instead
                self.dropped += 1
                _hang_up(sink)
                _hang_up(source)
                return
            try:
                sink.sendall(data)
            except OSError:
                break
        _hang_up(sink)

    def close(self) -> None:
        self._listener.close()


def _hang_up(s: socket.socket) -> None:
    """Close now (a FIN at once, and a recv blocked in another thread wakes up)."""
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def test_a_retried_add_whose_answer_was_lost_is_stored_once(service):
    """The connection breaks after the server committed the add: the client tries again with the
    same Idempotency-Key, and the server answers what it stored, storing nothing twice. Without
    retries the same break is Unavailable and the message is stored: the break came after the commit."""
    relay = Relay(service.url, drops=1)
    try:
        with Client(relay.url, api_key="key-acme") as c:
            stored = c.add(["第一条消息", "第二条消息"], user_id="重试", thread_id="t")
            assert relay.dropped == 1 and [m.text for m in stored] == ["第一条消息", "第二条消息"]
            assert [m.id for m in c.history(user_id="重试", thread_id="t")] == [m.id for m in stored]
            relay.drops = 1
            with Client(relay.url, api_key="key-acme", retries=0) as once, pytest.raises(Unavailable):
                once.add("只试一次", user_id="重试", thread_id="t")
            assert relay.dropped == 2 and [m.text for m in c.history(user_id="重试", thread_id="t")][-1] == "只试一次"

        async def twice() -> list[Message]:
            relay.drops = 1
            async with AsyncClient(relay.url, api_key="key-acme") as ac:
                await ac.add("异步的一条", user_id="重试", thread_id="async")
                return await ac.history(user_id="重试", thread_id="async")

        assert [m.text for m in asyncio.run(twice())] == ["异步的一条"] and relay.dropped == 3
        relay.path, relay.drops = b"/tools/", 1  # a tool call is not repeated once sent: it ran once
        with Client(relay.url, api_key="key-acme") as c, pytest.raises(Unavailable, match="may have been carried out"):
            c.call_tool("set_state", {"key": "计数", "value": 1}, user_id="重试")
        assert relay.dropped == 4 and [e.action for e in service.memory.audit(user_id="重试", tenant="acme")] == ["add"]
    finally:
        relay.close()


def test_a_regenerated_answers_replaced_one_is_left_out_unless_asked_for(service, client):
    """GET .../messages (Memory.history, Client.history) is the thread as its client shows it;
    ?replaced=include adds the replaced answers, each message naming what it replaced or what
    replaced it."""
    user = "重答"
    client.add(
        [
            {"role": "user", "content": "给我讲个笑话", "id": "q1"},
            {"role": "assistant", "content": "第一个笑话", "id": "a1"},
            {"role": "assistant", "content": "第二个笑话", "id": "a2", "metadata": {"replaces": ["a1"]}},
            {"role": "user", "content": "再来一个", "id": "q2"},
        ],
        user_id=user,
        thread_id="t",
    )
    for memory in (client, service.memory):
        tenant = {} if memory is client else {"tenant": "acme"}
        assert [m.id for m in memory.history(user_id=user, thread_id="t", **tenant)] == ["q1", "a2", "q2"]
        assert [m.id for m in memory.history(user_id=user, thread_id="t", last=2, **tenant)] == ["a2", "q2"]
        assert [m.id for m in memory.history(user_id=user, thread_id="t", last=3, **tenant)] == ["q1", "a2", "q2"]
        assert [m.id for m in memory.history(user_id=user, thread_id="t", replaced="include", **tenant)] == ["q1", "a1", "a2", "q2"]
        with pytest.raises(InvalidInput) as bad:
            memory.history(user_id=user, thread_id="t", replaced="all", **tenant)
        assert bad.value.field == "replaced"
    with httpx.Client(base_url=service.url, headers={"Authorization": "Bearer key-acme"}) as http:
        path = f"/v1/users/{user}/threads/t/messages"
        assert [m["id"] for m in http.get(path).json()] == ["q1", "a2", "q2"]
        shown = {m["id"]: (m["replaces"], m["replaced_by"]) for m in http.get(path, params={"replaced": "include"}).json()}
        assert shown == {"q1": (None, None), "a1": (None, "a2"), "a2": (["a1"], None), "q2": (None, None)}
        assert http.get(path, params={"replaced": "all"}).json()["error"]["field"] == "replaced"


def test_open_memory_gives_a_memory_for_a_store_and_a_client_for_a_service(service, tmp_path):
    def program(memory) -> str:
        memory.add(["我的后端使用SpringBoot"], user_id="开关", thread_id="s1", at=T0)
        return memory.context(user_id="开关", thread_id="s1", query="后端？", strategy="window").to_openai()[0]["content"]

    embedded = open_memory(f"sqlite:///{tmp_path / 'chat.db'}", tenant="acme")
    assert isinstance(embedded, Memory)
    remote = open_memory(service.url, api_key="key-acme", timeout=10)
    assert isinstance(remote, Client)
    with embedded, remote:
        assert program(embedded) == program(remote) == "我的后端使用SpringBoot"
    with pytest.raises(InvalidInput) as bad:
        Client("ftp://x")
    assert bad.value.field == "url"


@pytest.mark.parametrize(
    ("status", "body", "cls", "code", "field"),
    [
        (404, {"error": {"code": "thread_not_found", "message": "no", "field": "thread_id"}}, NotFound, "thread_not_found", "thread_id"),
        (400, {"error": {"code": "profile_mismatch", "message": "other layers", "field": None}}, ProfileMismatch, "profile_mismatch", None),
        (
            422,
            {"error": {"code": "unknown_name", "message": "unknown layer 'x'", "field": "strategy"}},
            UnknownName,
            "unknown_name",
            "strategy",
        ),
        (
            501,
            {"error": {"code": "missing_dependency", "message": "pip install", "field": None}},
            MissingDependency,
            "missing_dependency",
            None,
        ),
        (504, {"error": {"code": "upstream_timeout", "message": "slow", "field": None}}, ProviderUnavailable, "upstream_timeout", None),
        (413, {"error": {"code": "body_too_large", "message": "big", "field": None}}, InvalidInput, "body_too_large", "body"),
        (418, {"error": {"code": "teapot", "message": "no", "field": None}}, UsageError, "teapot", None),
        (500, {"error": {"code": "internal_error", "message": "boom", "field": None}}, RuntimeFailure, "internal_error", None),
        (502, "<html>bad gateway</html>", ProviderUnavailable, "provider_unavailable", None),
        (503, None, StoreError, "store_error", None),
    ],
)
def test_every_error_answer_maps_to_a_class_of_the_tree(status, body, cls, code, field):
    """Also the codes only the HTTP layer has, a code this client does not know (by its status),
    and an answer that is not the service's JSON (a gateway's HTML page)."""
    exc = error_from(status, body)
    assert type(exc) is cls and (exc.code, exc.field, exc.status) == (code, field, status) and str(exc)


def test_the_retry_policy():
    from memstack.client import Retries
    from memstack.client.transport import Request

    assert list(Retries(attempts=5, backoff=0.5, max_backoff=3).pauses()) == [0.5, 1.0, 2.0, 3, 3]
    assert list(Retries(attempts=0).pauses()) == []
    with pytest.raises(InvalidInput) as bad:
        Retries(attempts=-1)
    assert bad.value.field == "retries"
    add, tool, read = Request("POST", "/m", keyed=True), Request("POST", "/t"), Request("GET", "/r")
    assert [Retries.after_status(r, 503) for r in (add, tool, read)] == [True, False, True]
    assert [Retries.after_status(r, 500) for r in (add, tool, read)] == [False, False, False]
    assert [Retries.after_error(r, httpx.ReadTimeout("slow")) for r in (add, tool, read)] == [True, False, True]
    assert Retries.after_error(tool, httpx.ConnectError("refused"))  # nothing was sent
    with pytest.raises(InvalidInput) as nan:
        Request("POST", "/m", json={"x": float("nan")}).body()
    assert nan.value.field == "body"


def test_a_flush_waits_for_the_users_jobs_the_services_own_worker_is_running():
    """With the service's worker on (the default), a job of the user may be leased by it when the
    flush comes: the flush waits for it, so that what the client reads next is up to date."""
    slow = ScriptedModel(default=lambda messages, schema: time.sleep(0.3) or EXTRACTION)
    memory = Memory(
        "memory://", tenant="acme", layers=["summary-buffer", "entities", "retrieval"], options={"model": slow, "batch_messages": 2}
    )
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys=KEYS))  # its own worker runs
    with BackgroundServer(app) as server, Client(server.url, api_key="key-acme") as client:
        for n in range(3):
            client.add(
                [{"role": "user", "content": f"第{n}次：我正在开发知识中台"}, {"role": "assistant", "content": "好的"}],
                user_id="worker_user",
                thread_id="t",
            )
            time.sleep(0.05)  # the worker wakes on the add and leases the job
            report = client.flush(user_id="worker_user")
            assert report.failed == 0 and client.pending(user_id="worker_user") == 0, report
