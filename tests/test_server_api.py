"""The REST API over a real socket (uvicorn in a thread): messages, context, search, model-made
memory and its edits, import/export, deletion, tenants, JSON errors, the OpenAPI document, and a
tour that requests every route the app declares."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from urllib.parse import quote

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from fastapi.routing import APIRoute  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from starlette.routing import Route  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402
from memstack.types import Change  # noqa: E402

KEYS = {"key-acme": "acme", "key-globex": "globex"}
T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
PROJECT = [{"role": "user", "content": "我正在开发一个知识中台，后端使用SpringBoot"}, {"role": "assistant", "content": "好的，记住了。"}]


@pytest.fixture(scope="module")
def service():
    memory = Memory("memory://", layers="window,retrieval")
    # no background worker: the tests run the layers' jobs themselves (flush), deterministically
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys=KEYS, worker=False))
    with BackgroundServer(app) as server:
        yield SimpleNamespace(app=app, memory=memory, url=server.url)


def client(service, key: str | None = "key-acme") -> httpx.Client:
    return httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=30)


@pytest.fixture(scope="module")
def acme(service):
    with client(service) as c:
        yield c


@pytest.fixture(scope="module")
def globex(service):
    with client(service, "key-globex") as c:
        yield c


def ok(response: httpx.Response, status: int = 200):
    assert response.status_code == status, response.text
    return response.json()


def fails(response: httpx.Response, status: int, code: str, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code and error["message"], error
    if field is not None:
        assert error["field"] == field, error
    return error


def test_messages_history_threads_context_and_search(service, acme):
    stored = ok(acme.post("/v1/users/lisi/threads/s1/messages", json={"messages": PROJECT, "at": T0.isoformat()}), 201)["stored"]
    assert [m["content"] for m in stored] == [m["content"] for m in PROJECT] and stored[0]["timestamp"].startswith("2026-11-02T20:00:00")
    assert [m["content"] for m in ok(acme.get("/v1/users/lisi/threads/s1/messages"))] == [m["content"] for m in PROJECT]
    assert [m["role"] for m in ok(acme.get("/v1/users/lisi/threads/s1/messages", params={"last": 1}))] == ["assistant"]
    assert ok(acme.get("/v1/users/lisi/threads/s1/messages", params={"at": (T0 - timedelta(days=1)).isoformat()})) == []
    assert [(t["thread_id"], t["messages"]) for t in ok(acme.get("/v1/users/lisi/threads"))] == [("s1", 2)]
    ctx = ok(acme.post("/v1/users/lisi/threads/s1/context", json={"query": "我叫什么？", "strategy": "window", "k": 0, "max_tokens": 500}))
    assert [m["content"] for m in ctx["messages"]] == ["我叫什么？"] and ctx["dropped"][0]["layer"] == "window" and ctx["max_tokens"] == 500
    before = acme.post("/v1/users/lisi/search", json={"query": "我的后端使用什么技术？", "k": 3})
    assert before.headers["X-Memstack-Pending-Jobs"] == "1"  # not indexed yet, and the client can tell
    service.memory.flush()  # the retrieval layer's job
    answered = acme.post("/v1/users/lisi/search", json={"query": "我的后端使用什么技术？", "k": 3})
    assert answered.headers["X-Memstack-Pending-Jobs"] == "0"
    hits = ok(answered)
    assert hits and "SpringBoot" in hits[0]["text"] and hits[0]["thread_id"] == "s1"
    later = ok(
        acme.post("/v1/users/lisi/threads/s2/context", json={"query": "我的后端使用什么技术？", "at": (T0 + timedelta(days=7)).isoformat()})
    )
    memory_text = "\n".join(m["content"] for m in later["messages"] if m["role"] == "system")
    assert "SpringBoot" in memory_text and "2026-11-02" in memory_text and later["messages"][-1]["content"] == "我的后端使用什么技术？"


def test_a_key_touches_only_its_tenants_users(service, acme, globex):
    ok(acme.post("/v1/users/same-id/threads/t/messages", json={"messages": [{"role": "user", "content": "acme 的秘密"}]}), 201)
    for method, path in [
        ("GET", "/v1/users/same-id/threads"),
        ("GET", "/v1/users/same-id/threads/t/messages"),
        ("GET", "/v1/users/same-id/memories/entity"),
        ("GET", "/v1/users/same-id/audit"),
        ("GET", "/v1/users/same-id/usage"),
        ("GET", "/v1/users/same-id/export"),
        ("DELETE", "/v1/users/same-id/threads/t"),
        ("DELETE", "/v1/users/same-id"),
    ]:
        fails(globex.request(method, path), 404, "user_not_found", "user_id")
    ok(globex.post("/v1/users/same-id/threads/t/messages", json={"messages": [{"role": "user", "content": "globex 的消息"}]}), 201)
    assert [m["content"] for m in ok(globex.get("/v1/users/same-id/threads/t/messages"))] == ["globex 的消息"]
    assert [m["content"] for m in ok(acme.get("/v1/users/same-id/threads/t/messages"))] == ["acme 的秘密"]
    service.memory.flush()
    assert all("acme" not in h["text"] for h in ok(globex.post("/v1/users/same-id/search", json={"query": "秘密"})))
    assert (
        ok(httpx.get(f"{service.url}/v1/users/same-id/threads/t/messages", headers={"X-API-Key": "key-globex"}))[0]["content"]
        == "globex 的消息"
    )
    with client(service, None) as anonymous:
        fails(anonymous.get("/v1/users/same-id/threads"), 401, "unauthorized")
    with client(service, "wrong-key") as stranger:
        fails(stranger.get("/v1/users/same-id/threads"), 401, "unauthorized")
        fails(
            stranger.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "user": "same-id"}),
            401,
            "unauthorized",
        )


def test_model_made_memory_is_listed_edited_and_audited(service, acme):
    scope = service.memory.scope("wang", tenant="acme")
    relation_key = "知识中台\x1f后端使用\x1fspringboot"
    service.memory.store.records.apply(
        scope,
        [
            Change("put", "entity", "知识中台", {"name": "知识中台", "type": "项目"}, at=T0),
            Change("put", "relation", relation_key, {"source": "知识中台", "relation": "后端使用", "target": "SpringBoot"}, at=T0),
            Change("put", "state", "当前项目", {"value": "知识中台"}, at=T0),
        ],
        layer="extract",
    )
    assert [e["value"]["name"] for e in ok(acme.get("/v1/users/wang/memories/entity"))] == ["知识中台"]
    assert ok(acme.get("/v1/users/wang/memories/relation"))[0]["value"]["target"] == "SpringBoot"
    fails(acme.get("/v1/users/wang/memories/summary"), 422, "invalid_input", "thread_id")
    fails(acme.get("/v1/users/wang/memories/opinions"), 422, "invalid_input", "kind")
    put = ok(acme.put("/v1/users/wang/state/技术栈", json={"value": ["SpringBoot", "Redis"]}))
    assert put["value"] == ["SpringBoot", "Redis"] and put["version"] == 1
    assert {r["key"]: r["value"] for r in ok(acme.get("/v1/users/wang/memories/state"))} == {
        "当前项目": "知识中台",
        "技术栈": ["SpringBoot", "Redis"],
    }
    assert ok(acme.delete(f"/v1/users/wang/memories/relation/{quote(relation_key, safe='')}")) == {"deleted": 1}
    assert ok(acme.delete("/v1/users/wang/memories/entity/知识中台")) == {"deleted": 1}
    fails(acme.delete("/v1/users/wang/memories/entity/知识中台"), 404, "record_not_found", "key")
    assert ok(acme.get("/v1/users/wang/memories/entity")) == [] and ok(acme.get("/v1/users/wang/memories/relation")) == []
    audit = ok(acme.get("/v1/users/wang/audit", params={"limit": 10}))
    assert [(e["action"], e["kind"], e["layer"]) for e in audit[:3]] == [
        ("delete", "entity", "api"),
        ("delete", "relation", "api"),
        ("add", "state", "api"),
    ]
    assert [e["kind"] for e in ok(acme.get("/v1/users/wang/audit", params={"kind": "state"}))] == ["state", "state"]
    assert ok(acme.get("/v1/users/wang/usage")) == {"totals": {}, "calls": []}


def test_entity_attributes_and_summary_notes_are_corrected_through_the_audit(service, acme, globex):
    """The dashboard's corrections over REST (memstack.edits, layer "api"): an attribute set (the old
    value kept as past) and removed, a note rewritten and removed unless the summary changed since."""
    user = service.memory.scope("sun", tenant="acme")
    ok(acme.post("/v1/users/sun/threads/s1/messages", json={"messages": PROJECT}), 201)
    lives = {"value": "上海", "source_ids": [], "valid_from": T0.isoformat()}
    service.memory.store.records.apply(
        user, [Change("put", "entity", "user", {"name": "孙七", "attributes": {"住在": lives}}, at=T0)], layer="extract"
    )
    notes = {
        "items": [
            {"text": "用户在开发知识中台", "at": T0.isoformat(), "source_ids": []},
            {"text": "后端使用SpringBoot", "at": T0.isoformat(), "source_ids": []},
        ]
    }
    service.memory.store.records.apply(user.thread("s1"), [Change("put", "summary", "summary", notes, at=T0)], layer="summary")
    moved = ok(acme.put("/v1/users/sun/memories/entity/user/attributes/住在", json={"value": "深圳"}))
    attribute = moved["value"]["attributes"]["住在"]
    assert (attribute["value"], [p["value"] for p in attribute["past"]], moved["version"]) == ("深圳", ["上海"], 2)
    ok(acme.put("/v1/users/sun/memories/entity/user/attributes/职业", json={"value": "工程师"}))
    assert "职业" not in ok(acme.delete("/v1/users/sun/memories/entity/user/attributes/职业"))["value"]["attributes"]
    fails(acme.delete("/v1/users/sun/memories/entity/user/attributes/职业"), 404, "record_not_found", "attribute")
    fails(acme.put("/v1/users/sun/memories/entity/nobody/attributes/住在", json={"value": "北京"}), 404, "record_not_found", "key")
    fails(acme.put("/v1/users/sun/memories/entity/user/attributes/住在", json={"value": "  "}), 422, "invalid_input", "value")
    fails(acme.put("/v1/users/sun/memories/entity/user/attributes/住在", json={"value": 3}), 422, "invalid_input", "value")
    fails(globex.put("/v1/users/sun/memories/entity/user/attributes/住在", json={"value": "北京"}), 404, "user_not_found", "user_id")
    path = "/v1/users/sun/threads/s1/summary/notes"
    edited = ok(acme.put(f"{path}/1", json={"text": "后端改用Go", "expect": "后端使用SpringBoot"}))
    assert [i["text"] for i in edited["value"]["items"]] == ["用户在开发知识中台", "后端改用Go"]
    fails(acme.put(f"{path}/1", json={"text": "后端改用Rust", "expect": "后端使用SpringBoot"}), 409, "conflict")  # read again
    fails(acme.delete(f"{path}/0", params={"expect": "别的"}), 409, "conflict")
    assert [i["text"] for i in ok(acme.delete(f"{path}/0", params={"expect": "用户在开发知识中台"}))["value"]["items"]] == ["后端改用Go"]
    fails(acme.delete(f"{path}/5", params={"expect": "x"}), 404, "record_not_found", "index")
    fails(acme.delete(f"{path}/-1", params={"expect": "x"}), 422, "invalid_input", "index")
    fails(acme.delete(f"{path}/0"), 422, "invalid_input", "expect")
    fails(acme.put("/v1/users/sun/threads/nope/summary/notes/0", json={"text": "a", "expect": "b"}), 404, "thread_not_found", "thread_id")
    audit = ok(acme.get("/v1/users/sun/audit", params={"limit": 5}))
    assert [(e["kind"], e["layer"]) for e in audit] == [
        ("summary", "api"),
        ("summary", "api"),
        ("entity", "api"),
        ("entity", "api"),
        ("entity", "api"),
    ]


def test_state_values_read_back_as_the_value_itself_whoever_wrote_them():
    """The state layer's extraction, the set_state tool and PUT store a value the same way, and
    every REST read answers the value itself, as the get_state tool does: "杭州", never
    {"value": "杭州"}."""
    extraction = json.dumps({"state": [{"key": "当前项目", "value": "知识中台"}]}, ensure_ascii=False)
    memory = Memory(
        "memory://", layers="window,state", options={"model": ScriptedModel([extraction], native_schema=True), "batch_messages": 2}
    )
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), worker=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        u = "/v1/users/li"
        ok(
            c.post(
                f"{u}/threads/t/messages",
                json={"messages": [{"role": "user", "content": "我在做知识中台这个项目"}, {"role": "assistant", "content": "好的。"}]},
            ),
            201,
        )
        assert memory.flush().failed == 0
        assert ok(c.post(f"{u}/tools/set_state", json={"arguments": {"key": "技术栈", "value": ["SpringBoot", "Redis"]}}))[
            "result"
        ].startswith("state 技术栈 =")
        put = ok(c.put(f"{u}/state/city", json={"value": "杭州"}))
        assert (put["key"], put["value"], put["version"]) == ("city", "杭州", 1)
        whole = {"当前项目": "知识中台", "技术栈": ["SpringBoot", "Redis"], "city": "杭州"}
        assert ok(c.get(f"{u}/state")) == whole
        assert json.loads(ok(c.post(f"{u}/tools/get_state", json={"arguments": {}}))["result"]) == whole
        assert {k: ok(c.get(f"{u}/state/{k}"))["value"] for k in whole} == whole
        assert {r["key"]: r["value"] for r in ok(c.get(f"{u}/memories/state"))} == whole
        assert ok(c.put(f"{u}/state/city", json={"value": {"name": "杭州", "since": 2025}}))["value"] == {"name": "杭州", "since": 2025}
        assert json.loads(ok(c.post(f"{u}/tools/get_state", json={"arguments": {"key": "city"}}))["result"]) == {
            "name": "杭州",
            "since": 2025,
        }
        fails(c.get(f"{u}/state/nothing"), 404, "record_not_found", "key")
        fails(c.get("/v1/users/nobody/state"), 404, "user_not_found", "user_id")


def test_export_import_and_forget(service, acme, globex):
    ok(acme.post("/v1/users/zhao/threads/a/messages", json={"messages": PROJECT, "at": T0.isoformat()}), 201)
    ok(
        acme.post(
            "/v1/users/zhao/threads/b/messages",
            json={"messages": [{"role": "user", "content": "第二个会话"}], "at": (T0 + timedelta(days=1)).isoformat()},
        ),
        201,
    )
    records = ok(acme.get("/v1/users/zhao/export"))["records"]
    assert [(r["thread_id"], r["content"]) for r in records] == [
        ("a", PROJECT[0]["content"]),
        ("a", PROJECT[1]["content"]),
        ("b", "第二个会话"),
    ]
    fails(acme.post("/v1/users/qian/import", json={"records": records}), 422, "invalid_input", "records[0].user_id")
    mine = [{k: v for k, v in r.items() if k not in ("user_id", "tenant")} for r in records]
    assert ok(acme.post("/v1/users/qian/import", json={"records": mine})) == {"imported": 3, "records": 3}
    assert ok(acme.post("/v1/users/qian/import", json={"records": mine})) == {"imported": 0, "records": 3}  # ids kept: nothing twice
    copied = ok(acme.get("/v1/users/qian/export"))["records"]
    assert [{k: v for k, v in r.items() if k != "user_id"} for r in copied] == [
        {k: v for k, v in r.items() if k != "user_id"} for r in records
    ]
    assert ok(acme.delete("/v1/users/qian/threads/a")) == {"deleted": 2}
    fails(acme.get("/v1/users/qian/threads/a/messages"), 404, "thread_not_found", "thread_id")
    assert [t["thread_id"] for t in ok(acme.get("/v1/users/qian/threads"))] == ["b"]
    assert ok(acme.delete("/v1/users/qian"))["deleted"] >= 1
    fails(acme.get("/v1/users/qian/threads"), 404, "user_not_found")
    notes = ok(acme.get("/v1/deletions", params={"user_id": "qian"}))  # what the deletions leave: no content, no id
    assert [(d["kind"], d["layer"], d["counts"].get("messages")) for d in notes] == [("user", "api", 1), ("thread", "api", 2)]
    assert "qian" not in json.dumps(notes) and "SpringBoot" not in json.dumps(notes)
    assert ok(acme.get("/v1/deletions", params={"limit": 1})) == notes[:1]
    assert ok(globex.get("/v1/deletions", params={"user_id": "qian"})) == []
    fails(acme.get("/v1/deletions", params={"limit": 0}), 422, "invalid_input", "limit")
    assert len(ok(acme.get("/v1/users/zhao/export"))["records"]) == 3  # the original is untouched


def test_errors_are_json_with_a_stable_code_and_the_field(service, acme):
    path = "/v1/users/err/threads/t/messages"
    fails(acme.post(path, json={"messages": [{"role": "robot", "content": "hi"}]}), 422, "invalid_input", "messages[0].role")
    fails(acme.post(path, json={"messages": []}), 422, "invalid_input", "messages")
    fails(acme.post(path, json={"messages": [{"role": "user", "content": "   "}]}), 422, "invalid_input", "messages[0].content")
    fails(acme.post(path, json={"messages": [{"role": "user", "content": "hi"}], "at": "2026-11-02T20:00:00"}), 422, "invalid_input", "at")
    fails(acme.post(path, content=b"{not json", headers={"content-type": "application/json"}), 422, "invalid_input", "body")
    fails(acme.post(path, json={"messages": [{"role": "user", "content": "x" * 1_000_001}]}), 422, "invalid_input", "content")
    fails(acme.post(path, json={"messages": [{"role": "user", "content": "x" * 1_100_000}]}), 413, "body_too_large", "body")
    fails(acme.post("/v1/users/err/threads/t/context", json={"strategy": "window,nope"}), 422, "unknown_name", "strategy")
    fails(acme.post("/v1/users/err/threads/t/context", json={"k": -1}), 422, "invalid_input", "k")
    fails(
        acme.post("/v1/users/err/threads/t/context", json={"max_tokens": 5, "query": "一个很长很长很长很长很长很长很长的问题"}),
        422,
        "budget_too_small",
    )
    fails(acme.get("/v1/users/err/audit", params={"limit": 0}), 422, "invalid_input", "limit")
    fails(acme.get("/v1/users/" + "x" * 300 + "/threads"), 422, "invalid_input", "user_id")
    fails(acme.get("/v1/nothing-here"), 404, "not_found")
    fails(acme.patch("/v1/users/err/threads"), 405, "method_not_allowed")


def test_an_error_in_an_item_of_a_list_names_its_index_path(service, acme):
    """The library checks one message and names its field ("content"); the API names the
    message too, as it does for a field pydantic checks (messages[0].role)."""
    path = "/v1/users/err/threads/t/messages"
    fine = {"role": "user", "content": "hi"}
    error = fails(
        acme.post(path, json={"messages": [fine, fine, {"role": "user", "content": "   "}]}), 422, "invalid_input", "messages[2].content"
    )
    assert error["message"] == "messages[2].content: user message content is empty"
    fails(acme.post(path, json={"messages": [fine, {"role": "tool", "content": "42"}]}), 422, "invalid_input", "messages[1].tool_call_id")
    fails(
        acme.post(path, json={"messages": [{"role": "user", "content": [{"text": "no type"}]}]}),
        422,
        "invalid_input",
        "messages[0].content",
    )
    assert ok(
        acme.post(
            path, json={"messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "f"}}]}]}
        ),
        201,
    )


def test_the_413_body_is_shaped_like_every_other_error(service, acme):
    """Same keys, same serialisation (the bytes of the app's JSONResponse), the field named."""
    path = "/v1/users/err/threads/t/messages"
    too_large = acme.post(path, json={"messages": [{"role": "user", "content": "x" * 1_100_000}]})
    invalid = acme.post(path, content=b"{not json", headers={"content-type": "application/json"})
    assert (too_large.status_code, invalid.status_code) == (413, 422)
    assert too_large.headers["content-type"] == invalid.headers["content-type"]
    for response in (too_large, invalid):
        body = response.json()
        assert list(body) == ["error"] and list(body["error"]) == ["code", "message", "field"], body
        assert response.content == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert too_large.json()["error"] == {"code": "body_too_large", "message": too_large.json()["error"]["message"], "field": "body"}
    assert "1048576 bytes" in too_large.json()["error"]["message"]


def test_health_before_start_and_metrics(service, acme):
    idle = create_app(Memory("memory://"), ServerConfig(model=ScriptedModel()))
    fails(TestClient(idle).get("/health"), 503, "not_ready")  # the lifespan has not run: not ready
    assert ok(acme.get("/health"))["status"] == "ok"
    text = acme.get("/metrics").text
    assert 'memstack_http_requests_total{method="GET",route="/health",status="200"}' in text and "memstack_jobs_pending" in text


def test_the_openapi_document_validates(acme):
    from openapi_spec_validator import validate

    spec = ok(acme.get("/openapi.json"))
    validate(spec)
    assert {"/v1/chat/completions", "/v1/models", "/v1/users/{user_id}/threads/{thread_id}/messages", "/health", "/metrics"} <= set(
        spec["paths"]
    )
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_every_route_the_app_declares_is_requested():
    """A tour of the API on a fresh app; its own metrics say which routes were requested."""
    memory = Memory("memory://", layers="window")
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的")))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        u = "/v1/users/tour"
        ok(c.post(f"{u}/threads/t/messages", json={"messages": PROJECT}), 201)
        ok(c.get(f"{u}/threads/t/messages"))
        ok(c.get(f"{u}/threads"))
        ok(c.post(f"{u}/threads/t/context", json={"query": "后端？"}))
        ok(c.post(f"{u}/search", json={"query": "后端"}))
        ok(c.put(f"{u}/state/项目", json={"value": "知识中台"}))
        ok(c.get(f"{u}/memories/state"))
        ok(c.get(f"{u}/state"))
        ok(c.get(f"{u}/state/项目"))
        ok(c.delete(f"{u}/memories/state/项目"))
        ok(c.get(f"{u}/audit"))
        ok(c.get(f"{u}/usage"))
        ok(c.get(f"{u}/pending"))
        ok(c.post(f"{u}/flush"))
        assert c.delete(f"{u}/saved/note-none").status_code == 422  # no such saved memory: the field named
        for method, path, options in [
            ("PUT", f"{u}/memories/entity/user/attributes/城市", {"json": {"value": "杭州"}}),
            ("DELETE", f"{u}/memories/entity/user/attributes/城市", {}),
            ("PUT", f"{u}/threads/t/summary/notes/0", {"json": {"text": "新", "expect": "旧"}}),
            ("DELETE", f"{u}/threads/t/summary/notes/0", {"params": {"expect": "旧"}}),
        ]:  # the tour's store has no entity or summary: the answer is its 404 or 400
            assert c.request(method, path, **options).status_code in (400, 404), path
        ok(c.get("/v1/deletions"))
        ok(c.get("/v1/retention"))
        ok(c.get("/v1/usage"))
        records = ok(c.get(f"{u}/export"))["records"]
        ok(c.post("/v1/users/tour2/import", json={"records": [{k: v for k, v in r.items() if k != "user_id"} for r in records]}))
        ok(c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "你好"}], "user": "tour"}))
        ok(c.get("/v1/models"))
        dify = {"knowledge_id": "tour", "query": "后端", "retrieval_setting": {"top_k": 2, "score_threshold": 0}}
        ok(c.post("/dify/retrieval", json=dify))
        assert {t["function"]["name"] for t in ok(c.get("/v1/tools"))} >= {"save_memory", "recall_memory"}
        saved = ok(c.post(f"{u}/tools/save_memory", json={"arguments": {"content": "我的后端使用SpringBoot"}}))
        assert saved["tool"] == "save_memory" and not saved["result"].startswith("error")
        assert "SpringBoot" in ok(c.post(f"{u}/tools/recall_memory", json={"arguments": {"query": "后端用什么？"}}))["result"]
        assert ok(c.post(f"{u}/tools/no_such_tool", json={}))["result"].startswith("error")
        ok(c.delete(f"{u}/threads/t"))
        ok(c.delete("/v1/users/tour2"))
        ok(c.get("/health"))
        assert c.get("/metrics").status_code == 200
        for path in ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
            assert c.get(path).status_code == 200, path
        # every documented operation, and the undocumented routes of the app itself (/docs, ...)
        declared = {(method.upper(), path) for path, operations in app.openapi()["paths"].items() for method in operations}
        declared |= {
            (method, r.path)
            for r in app.routes
            if isinstance(r, Route) and not isinstance(r, APIRoute)
            for method in r.methods
            if method != "HEAD"
        }
        assert len(declared) == 37, sorted(declared)
        deadline = time.monotonic() + 10  # a request is counted just after its response is sent
        while (missing := declared - app.state.metrics.seen_routes()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not missing, f"routes never requested: {sorted(missing)}"


SERVICE_PAGES = ("/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


@pytest.mark.parametrize(
    ("options", "public"),
    [
        ({}, ()),
        ({"public_metrics": True}, ("/metrics",)),
        ({"public_docs": True}, SERVICE_PAGES[1:]),
        ({"public_metrics": True, "public_docs": True}, SERVICE_PAGES),
    ],
)
def test_metrics_and_the_api_document_need_a_key_unless_made_public(options, public):
    """With keys configured, /metrics, /openapi.json, /docs and /redoc are closed like every /v1
    route (401, the JSON error) unless ServerConfig makes them public; /health is always open."""
    app = create_app(Memory("memory://", layers="window"), ServerConfig(model=ScriptedModel(), api_keys=KEYS, worker=False, **options))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert ok(anonymous.get("/health"))["status"] == "ok"
        for path in SERVICE_PAGES:
            if path in public:
                assert anonymous.get(path).status_code == 200, path
                continue
            error = fails(anonymous.get(path), 401, "unauthorized")
            assert "API key" in error["message"] and anonymous.get(path).headers["www-authenticate"] == "Bearer", path
            fails(anonymous.get(path, headers={"Authorization": "Bearer wrong-key"}), 401, "unauthorized")
            assert anonymous.get(path, headers={"Authorization": "Bearer key-acme"}).status_code == 200, path
            assert anonymous.get(path, headers={"X-API-Key": "key-globex"}).status_code == 200, path
        metrics = anonymous.get("/metrics", headers={"X-API-Key": "key-acme"}).text
        assert 'route="/health",status="200"' in metrics  # a refused request is counted too
        assert ('status="401"' in metrics) == ("/metrics" not in public or "/docs" not in public)
