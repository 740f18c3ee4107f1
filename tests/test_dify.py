"""Dify's External Knowledge API (``POST /dify/retrieval``) over a real socket (uvicorn in a thread,
httpx): the request and response shapes of Dify's documentation, Dify's error codes for a bad
header, an unknown key and an unknown knowledge id, tenants kept apart, Chinese and English
queries, ``score_threshold`` and ``top_k``, ``metadata_condition`` (thread, time, roles, and
operators refused by name), and no server error on any body."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")

from memstack import Memory  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402

KEYS = {"key-acme": "acme", "key-globex": "globex"}
T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
#: lisi's memory (tenant acme): three sessions, Chinese and English
SESSIONS = [
    ("s1", T0, [("我正在开发一个知识中台，后端使用SpringBoot", "好的，记住了。"), ("前端用的是Vue3和TypeScript", "明白。")]),
    ("s2", T0 + timedelta(days=3), [("I play tennis every Sunday morning with my sister", "Sounds fun!")]),
    ("s3", T0 + timedelta(days=7), [("我们的知识中台下个月上线，后端要加上Redis缓存", "好的，Redis缓存记下了。")]),
]
#: Dify's documented request, as its docs show it (knowledge_id our user's)
DOCUMENTED = {"knowledge_id": "lisi", "query": "知识中台的后端用什么？", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}


@pytest.fixture(scope="module")
def service():
    memory = Memory("memory://", layers="window,retrieval")
    for thread, at, rounds in SESSIONS:
        for i, (said, answer) in enumerate(rounds):
            when = at + timedelta(minutes=i)
            memory.add(
                [{"role": "user", "content": said}, {"role": "assistant", "content": answer}],
                user_id="lisi",
                thread_id=thread,
                tenant="acme",
                at=when,
            )
    memory.add("globex 的王五喜欢滑雪", user_id="wangwu", thread_id="g1", tenant="globex", at=T0)
    memory.flush()
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys=KEYS, worker=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield SimpleNamespace(url=server.url, http=http)


def retrieve(service, body: object, *, key: str | None = "key-acme", headers: dict[str, str] | None = None) -> httpx.Response:
    sent = headers if headers is not None else ({"Authorization": f"Bearer {key}"} if key else {})
    return service.http.post(
        "/dify/retrieval", content=json.dumps(body, ensure_ascii=False).encode(), headers={**sent, "Content-Type": "application/json"}
    )


def records(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"records"}
    for r in body["records"]:
        assert set(r) == {"content", "score", "title", "metadata"}
        assert isinstance(r["content"], str) and r["content"] and isinstance(r["title"], str)
        assert isinstance(r["metadata"], dict)  # never null: Dify's pipeline fails on a null metadata
        assert 0.0 <= r["score"] <= 1.0
    scores = [r["score"] for r in body["records"]]
    assert scores == sorted(scores, reverse=True)
    return body["records"]


def dify_error(response: httpx.Response, status: int, error_code: int, field: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == error_code and body["error_msg"], body
    assert body["error"]["message"] == body["error_msg"]
    if field is not None:
        assert body["error"]["field"] == field, body
    return body


def test_the_documented_request_gets_the_documented_response(service):
    found = records(retrieve(service, DOCUMENTED))
    assert 1 <= len(found) <= 2
    best = found[0]
    assert best["score"] == 1.0 and "知识中台" in best["content"] and ("SpringBoot" in best["content"] or "Redis" in best["content"])
    meta = best["metadata"]
    assert meta["thread_id"] in ("s1", "s3") and meta["kind"] == "round" and "user" in meta["roles"]
    assert best["title"] == f"{meta['thread_id']} · {meta['timestamp'][:10]}"
    assert datetime.fromisoformat(meta["timestamp"]).timestamp() == meta["time"]


def test_chinese_and_english_queries_find_what_was_said(service):
    setting = {"top_k": 3, "score_threshold": 0.0}
    zh = records(retrieve(service, {"knowledge_id": "lisi", "query": "前端用什么框架？", "retrieval_setting": setting}))
    assert "Vue3" in zh[0]["content"]
    en = records(retrieve(service, {"knowledge_id": "lisi", "query": "What sport do I play on Sundays?", "retrieval_setting": setting}))
    assert "tennis" in en[0]["content"] and en[0]["metadata"]["lang"] == "en"
    # a question about nothing the user said finds nothing, whatever the threshold
    assert records(retrieve(service, {"knowledge_id": "lisi", "query": "火星上的天气怎么样？", "retrieval_setting": setting})) == []


def test_score_threshold_and_top_k(service):
    body = {"knowledge_id": "lisi", "query": "知识中台后端", "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}
    every = records(retrieve(service, body))
    assert len(every) >= 2 and every[0]["score"] == 1.0 and every[-1]["score"] < 1.0
    middle = (every[0]["score"] + every[-1]["score"]) / 2
    kept = records(retrieve(service, {**body, "retrieval_setting": {"top_k": 5, "score_threshold": middle}}))
    assert kept == [r for r in every if r["score"] >= middle] and len(kept) < len(every)
    assert records(retrieve(service, {**body, "retrieval_setting": {"top_k": 1, "score_threshold": 0.0}})) == every[:1]
    # Dify sends nulls for settings it leaves unset: the default top_k, no threshold
    assert records(retrieve(service, {**body, "retrieval_setting": {"top_k": None, "score_threshold": None}})) == every[:4]


def test_wrong_keys_get_difys_error_codes(service):
    for headers in ({}, {"Authorization": "key-acme"}, {"Authorization": "Basic a2V5LWFjbWU="}, {"Authorization": "Bearer"}):
        dify_error(retrieve(service, DOCUMENTED, headers=headers), 403, 1001)
    body = dify_error(retrieve(service, DOCUMENTED, key="key-nobody"), 403, 1002)
    assert "key-nobody" not in body["error_msg"]
    # the key is checked before the body is read: a stranger learns nothing of what is valid
    dify_error(retrieve(service, {"nonsense": True}, key="key-nobody"), 403, 1002)


def test_knowledge_ids_are_users_of_the_keys_tenant(service):
    dify_error(retrieve(service, {**DOCUMENTED, "knowledge_id": "nobody"}, key="key-acme"), 404, 2001, "knowledge_id")
    # another tenant's user does not exist for this key, and the other tenant does not see lisi
    dify_error(retrieve(service, {**DOCUMENTED, "knowledge_id": "wangwu"}, key="key-acme"), 404, 2001)
    dify_error(retrieve(service, DOCUMENTED, key="key-globex"), 404, 2001)
    skiing = records(
        retrieve(
            service,
            {"knowledge_id": "wangwu", "query": "王五喜欢什么运动？", "retrieval_setting": {"top_k": 3, "score_threshold": 0}},
            key="key-globex",
        )
    )
    assert ["滑雪" in r["content"] for r in skiing] == [True]
    for bad in ("", "   ", "a\x00b", "x" * 300):
        dify_error(retrieve(service, {**DOCUMENTED, "knowledge_id": bad}), 422, 422, "knowledge_id")


def test_metadata_conditions_filter_the_records(service):
    def search(*conditions: dict, operator: str | None = "and", query: str = "知识中台 后端 tennis") -> list[dict]:
        body = {"knowledge_id": "lisi", "query": query, "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}
        body["metadata_condition"] = {"logical_operator": operator, "conditions": list(conditions)}
        return records(retrieve(service, body))

    everything = search()
    assert {r["metadata"]["thread_id"] for r in everything} == {"s1", "s2", "s3"}
    assert {r["metadata"]["thread_id"] for r in search({"name": "thread_id", "comparison_operator": "is", "value": "s3"})} == {"s3"}
    assert {r["metadata"]["thread_id"] for r in search({"name": "thread_id", "comparison_operator": "not in", "value": "s1,s3"})} == {"s2"}
    week_later = int((T0 + timedelta(days=5)).timestamp())
    assert {r["metadata"]["thread_id"] for r in search({"name": "time", "comparison_operator": "after", "value": week_later})} == {"s3"}
    before = search({"name": "timestamp", "comparison_operator": "before", "value": "2026-11-04"})
    assert {r["metadata"]["thread_id"] for r in before} == {"s1"}
    either = search(
        {"name": "thread_id", "comparison_operator": "is", "value": "s2"},
        {"name": "time", "comparison_operator": "after", "value": week_later},
        operator="or",
    )
    assert {r["metadata"]["thread_id"] for r in either} == {"s2", "s3"}
    assert search({"name": "roles", "comparison_operator": "contains", "value": "user"}) == everything
    assert search({"name": "category", "comparison_operator": "not empty"}) == []
    assert search({"name": "round", "comparison_operator": "≥", "value": "2"}) == [r for r in everything if r["metadata"]["round"] >= 2]
    assert search({"name": "thread_id", "comparison_operator": "is", "value": "s9"}) == []
    # null conditions (Dify's model_dump of an empty condition) keep every record
    assert search(operator=None) == everything


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        ({"name": "thread_id", "comparison_operator": "like", "value": "s1"}, "comparison_operator"),
        ({"name": "thread_id", "comparison_operator": ">", "value": "s1"}, "comparison_operator"),
        ({"name": "roles", "comparison_operator": "start with", "value": "u"}, "comparison_operator"),
        ({"name": "作者", "comparison_operator": "is", "value": "李四"}, "name"),
        ({"name": ["thread_id", "kind"], "comparison_operator": "is", "value": "s1"}, "name"),
        ({"name": "thread_id", "comparison_operator": "is"}, "value"),
        ({"name": "round", "comparison_operator": "=", "value": "first"}, "value"),
        ({"name": "time", "comparison_operator": "after", "value": "last week"}, "value"),
        ({"name": "time", "comparison_operator": "before", "value": 1e300}, "value"),
        ({"name": "thread_id", "comparison_operator": "is", "value": ["s1", "s2"]}, "value"),
        ({"name": "thread_id", "comparison_operator": "in", "value": " , ,"}, "value"),
    ],
)
def test_a_condition_memstack_cannot_apply_is_refused_by_name(service, condition, field):
    body = {
        **DOCUMENTED,
        "metadata_condition": {"conditions": [{"name": "kind", "comparison_operator": "is", "value": "round"}, condition]},
    }
    dify_error(retrieve(service, body), 422, 422, f"metadata_condition.conditions[1].{field}")


def test_no_body_gets_a_server_error(service):
    bodies: list[object] = [
        None,
        [],
        "retrieval",
        {},
        {"knowledge_id": "lisi"},
        {**DOCUMENTED, "query": ""},
        {**DOCUMENTED, "query": "  \n"},
        {**DOCUMENTED, "query": 42},
        {**DOCUMENTED, "knowledge_id": None},
        {**DOCUMENTED, "knowledge_id": ["lisi"]},
        {**DOCUMENTED, "retrieval_setting": None},
        {**DOCUMENTED, "retrieval_setting": {"top_k": 0, "score_threshold": 0.5}},
        {**DOCUMENTED, "retrieval_setting": {"top_k": 10**9, "score_threshold": 0.5}},
        {**DOCUMENTED, "retrieval_setting": {"top_k": 2, "score_threshold": 1.5}},
        {**DOCUMENTED, "retrieval_setting": {"top_k": 2.5, "score_threshold": 0.5}},
        {**DOCUMENTED, "retrieval_setting": {"top_k": "many", "score_threshold": "high"}},
        {**DOCUMENTED, "metadata_condition": {"logical_operator": "xor", "conditions": []}},
        {**DOCUMENTED, "metadata_condition": {"conditions": [None]}},
        {**DOCUMENTED, "metadata_condition": {"conditions": [{"name": "time", "comparison_operator": "after", "value": True}]}},
        {**DOCUMENTED, "metadata_condition": {"conditions": [{"name": "round", "comparison_operator": "in", "value": [1, 2]}]}},
        {**DOCUMENTED, "metadata_condition": "thread_id=s1"},
        {**DOCUMENTED, "query": "查询" * 3000},
    ]
    for body in bodies:
        response = retrieve(service, body)
        assert response.status_code in (200, 422), (body, response.text)
        if response.status_code == 422:
            assert response.json()["error_code"] == 422 and response.json()["error"]["field"], response.text
    setting = b'"retrieval_setting": {"top_k": 2, "score_threshold": 0}'
    when = b'"metadata_condition": {"conditions": [{"name": "timestamp", "comparison_operator": "after", "value": "9999-12-31T23:59:59-12:00"}]}'
    raw_bodies = [
        (b"{not json", "body"),
        (b"\xff\xfe\x00", "body"),
        (b"[" * 5000, "body"),
        (
            b'{"knowledge_id": "lisi", "query": "q", "retrieval_setting": {"top_k": 2, "score_threshold": NaN}}',
            "retrieval_setting.score_threshold",
        ),
        (b'{"knowledge_id": "lisi", "query": "\\ud800", ' + setting + b"}", "query"),  # a lone surrogate: no UTF-8 for the embedder
        (b'{"knowledge_id": "lisi", "query": "a\\u0000b", ' + setting + b"}", "query"),
        (b'{"knowledge_id": "\\udfff", "query": "q", ' + setting + b"}", "knowledge_id"),
        (
            b'{"knowledge_id": "lisi", "query": "q", ' + setting + b", " + when + b"}",
            "metadata_condition.conditions[0].value",
        ),  # year 10000 UTC
    ]
    for raw, field in raw_bodies:
        response = service.http.post(
            "/dify/retrieval", content=raw, headers={"Authorization": "Bearer key-acme", "Content-Type": "application/json"}
        )
        assert response.status_code == 422 and response.json()["error"]["field"] == field, response.text
    # extra fields a later Dify may send are ignored
    assert records(retrieve(service, {**DOCUMENTED, "new_field": {"x": 1}})) == records(retrieve(service, DOCUMENTED))


def test_without_api_keys_any_request_is_the_default_tenant():
    memory = Memory("memory://", layers="window,retrieval")
    memory.add("我的猫叫年糕", user_id="me", thread_id="t")
    memory.flush()
    app = create_app(memory, ServerConfig(model=ScriptedModel(), worker=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        body = {"knowledge_id": "me", "query": "我的猫叫什么名字？", "retrieval_setting": {"top_k": 1, "score_threshold": 0}}
        for headers in ({}, {"Authorization": "Bearer anything"}):
            found = http.post("/dify/retrieval", json=body, headers=headers).json()["records"]
            assert ["年糕" in r["content"] for r in found] == [True]
