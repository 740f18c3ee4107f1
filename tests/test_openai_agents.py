"""The OpenAI Agents SDK adapters under the SDK's own ``Runner``: MemstackSession (items with tool
calls stored and resumed, pop, clear, limits, bad items) and the memory-carrying instructions,
on a scripted SDK model (``memstack.testing.openai_agents``) and on the SDK's
OpenAIChatCompletionsModel against memstack's proxy on a real server."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agents", reason="needs: pip install 'memstack[openai-agents]'")

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, RunConfig, Runner, Session, SessionSettings, function_tool  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.openai_agents import MemstackSession, memory_instructions  # noqa: E402
from memstack.testing.openai_agents import ScriptedAgentModel, tool_call  # noqa: E402

RUN = RunConfig(tracing_disabled=True)  # no trace export: tests stay off the network
PROJECT = "我正在开发一个知识中台，后端使用SpringBoot"
PROJECT_EN = "I'm building a knowledge platform and the backend uses SpringBoot"


@function_tool
def get_weather(city: str) -> str:
    """The weather of a city today."""
    return f"{city}: 晴, 25°C"


def agent(model: ScriptedAgentModel, instructions=None, **kw) -> Agent:
    return Agent(name="assistant", model=model, instructions=instructions, tools=[get_weather], **kw)


@pytest.fixture
def memory():
    with Memory("memory://", layers="window,retrieval") as m:
        yield m


@pytest.mark.asyncio
async def test_a_run_with_a_tool_call_is_stored_as_chat_and_resumed_by_a_new_session(memory):
    session = MemstackSession("s1", memory, user_id="u1")
    assert isinstance(session, Session)  # the SDK's runtime-checkable session protocol
    model = ScriptedAgentModel([tool_call("get_weather", {"city": "杭州"}, call_id="call_1"), "杭州今天晴，25°C。"])
    result = await Runner.run(agent(model), "杭州今天天气怎么样？", session=session, run_config=RUN)
    assert result.final_output == "杭州今天晴，25°C。"

    # memstack's history holds the run as a chat: the layers see the user's and the model's text
    stored = memory.history(user_id="u1", thread_id="s1", order="append")
    assert [(m.role, m.text) for m in stored] == [
        ("user", "杭州今天天气怎么样？"),
        ("assistant", ""),
        ("tool", "杭州: 晴, 25°C"),
        ("assistant", "杭州今天晴，25°C。"),
    ]
    assert stored[1].tool_calls[0].id == "call_1" and json.loads(stored[1].tool_calls[0].arguments) == {"city": "杭州"}
    assert stored[2].tool_call_id == "call_1"

    # a new session object with the same ids gets the very items back, and the next run sends them
    resumed = MemstackSession("s1", memory, user_id="u1")
    items = await resumed.get_items()
    assert items == await session.get_items()
    assert [i.get("type") for i in items] == [None, "function_call", "function_call_output", "message"]
    assert items[1]["call_id"] == "call_1" and items[2]["output"] == "杭州: 晴, 25°C"
    assert items[3]["content"][0]["text"] == "杭州今天晴，25°C。" and items[3]["id"].startswith("msg_")

    model2 = ScriptedAgentModel(["明天也是晴天。"])
    await Runner.run(agent(model2), "明天呢？", session=resumed, run_config=RUN)
    sent = model2.calls[0].input
    assert sent[:4] == items and sent[4] == {"role": "user", "content": "明天呢？"}
    assert len(await resumed.get_items()) == 6


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("said", "asked", "answer"),
    [(PROJECT, "我的后端使用什么技术？", "好的，记住了。"), (PROJECT_EN, "What does my backend use?", "Noted.")],
    ids=["zh", "en"],
)
async def test_memory_from_an_earlier_session_reaches_the_model_in_its_instructions(memory, said, asked, answer):
    first = MemstackSession("s1", memory, user_id="u1")
    await Runner.run(agent(ScriptedAgentModel([answer])), said, session=first, run_config=RUN)
    memory.flush()  # the retrieval layer's indexing job (a worker does it in an app)

    later = MemstackSession("s2", memory, user_id="u1")
    model = ScriptedAgentModel(["SpringBoot."])
    await Runner.run(agent(model, later.instructions("You are a helpful assistant.")), asked, session=later, run_config=RUN)
    got = model.calls[0]
    assert got.instructions.startswith("You are a helpful assistant.\n\n")
    assert said in got.instructions  # the earlier session's words, as memstack's retrieval renders them
    assert got.input == [{"role": "user", "content": asked}]  # the new session's conversation: only the question

    # another user asking the same gets nothing of u1's memory
    stranger = ScriptedAgentModel(["?"])
    other = MemstackSession("s2", memory, user_id="u2")
    await Runner.run(agent(stranger, other.instructions("You are a helpful assistant.")), asked, session=other, run_config=RUN)
    assert stranger.calls[0].instructions == "You are a helpful assistant."


@pytest.mark.asyncio
async def test_memory_instructions_for_a_global_agent_and_a_callable_base(memory):
    memory.add([PROJECT, {"role": "assistant", "content": "好的。"}], user_id="u1", thread_id="s1")
    memory.flush()

    def base(run_context, agent_) -> str:
        return f"你是{agent_.name}。"

    instructions = memory_instructions(memory, base, user_id="u1", thread_id="s3", strategy="retrieval")
    model = ScriptedAgentModel(["SpringBoot"])
    await Runner.run(agent(model, instructions), "我的后端用什么？", run_config=RUN)  # no session at all
    assert model.calls[0].instructions.startswith("你是assistant。\n\n") and PROJECT in model.calls[0].instructions
    with pytest.raises(InvalidInput) as bad:
        memory_instructions(memory, 42, user_id="u1", thread_id="s3")
    assert bad.value.field == "base"


@pytest.mark.asyncio
async def test_pop_item_hides_the_newest_item_from_the_session_and_the_memory(memory):
    session = MemstackSession("s1", memory, user_id="u1")
    assert await session.pop_item() is None
    await session.add_items([{"role": "user", "content": "我喜欢打网球"}, {"role": "assistant", "content": "记住了"}])
    await session.add_items([{"role": "user", "content": "说错了，我喜欢羽毛球"}])

    popped = await session.pop_item()
    assert popped == {"role": "user", "content": "说错了，我喜欢羽毛球"}
    assert await MemstackSession("s1", memory, user_id="u1").get_items() == [
        {"role": "user", "content": "我喜欢打网球"},
        {"role": "assistant", "content": "记住了"},
    ]
    context = memory.context(user_id="u1", thread_id="s1", max_tokens=None)
    assert "羽毛球" not in json.dumps(context.to_openai(), ensure_ascii=False)
    assert (await session.pop_item())["content"] == "记住了"
    assert (await session.pop_item())["content"] == "我喜欢打网球"
    assert await session.pop_item() is None and await session.get_items() == []

    await session.add_items([{"role": "user", "content": "again"}])  # the popped ones stay gone
    assert await session.get_items() == [{"role": "user", "content": "again"}]
    await session.clear_session()
    assert await session.get_items() == [] and memory.threads(user_id="u1") == []


@pytest.mark.asyncio
async def test_limits_from_the_call_and_from_the_session_settings(memory):
    session = MemstackSession("s1", memory, user_id="u1", session_settings=SessionSettings(limit=2))
    await session.add_items([{"role": "user", "content": f"第{i}句"} for i in range(100)])
    await session.pop_item()
    assert [i["content"] for i in await session.get_items()] == ["第97句", "第98句"]
    assert [i["content"] for i in await session.get_items(limit=70)][-1] == "第98句"
    assert len(await session.get_items(limit=70)) == 70
    assert await session.get_items(limit=0) == []


@pytest.mark.asyncio
async def test_bad_items_are_refused_by_position_and_nothing_is_stored(memory):
    session = MemstackSession("s1", memory, user_id="u1")
    good = {"role": "user", "content": "hello"}
    for bad, field in [
        ("just text", "items[1]"),
        ({"role": "user", "content": "x", "score": float("nan")}, "items[1]"),
        ({"type": "function_call", "call_id": "c" * 300, "name": "f", "arguments": "{}"}, "items[1].tool_calls[0].id"),
        ({"role": "user", "content": "nul \x00 here"}, "items[1].content"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            await session.add_items([good, bad])
        assert refused.value.field == field
    assert await session.get_items() == [] and memory.threads(user_id="u1") == []
    with pytest.raises(InvalidInput) as no_user:
        MemstackSession("s1", memory, user_id="")
    assert no_user.value.field == "user_id"


@pytest.mark.asyncio
async def test_items_without_text_are_kept_whole_and_a_thread_from_another_door_reads_as_items(memory):
    session = MemstackSession("s1", memory, user_id="u1")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking"}]}
    empty_output = {"type": "function_call_output", "call_id": "c1", "output": ""}
    image = {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]}
    await session.add_items([reasoning, empty_output, image])
    assert await session.get_items() == [reasoning, empty_output, image]
    assert all(m.text == "" for m in memory.history(user_id="u1", thread_id="s1"))

    memory.add(
        [
            {"role": "user", "content": "北京天气？"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "北京"}'}}],
            },
            {"role": "tool", "tool_call_id": "c9", "content": "北京: 晴"},
            {"role": "assistant", "content": "北京晴。"},
        ],
        user_id="u1",
        thread_id="s2",
    )
    items = await MemstackSession("s2", memory, user_id="u1").get_items()
    assert items == [
        {"role": "user", "content": "北京天气？"},
        {"type": "function_call", "call_id": "c9", "name": "get_weather", "arguments": '{"city": "北京"}'},
        {"type": "function_call_output", "call_id": "c9", "output": "北京: 晴"},
        {"role": "assistant", "content": "北京晴。"},
    ]
    model = ScriptedAgentModel(["还是晴天。"])
    await Runner.run(agent(model), "现在呢？", session=MemstackSession("s2", memory, user_id="u1"), run_config=RUN)
    assert model.calls[0].input[:4] == items


def test_the_sdk_through_memstacks_proxy_on_a_real_server_remembers_across_threads():
    pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
    import asyncio

    from openai import AsyncOpenAI

    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.testing import ScriptedModel

    upstream = ScriptedModel(["好的，记住了。", "你的后端使用 SpringBoot。"])
    with (
        Memory("memory://", layers="window,retrieval") as memory,
        BackgroundServer(create_app(memory, ServerConfig(model=upstream, worker=False))) as server,
    ):

        async def ask(thread: str, text: str) -> str:
            client = AsyncOpenAI(base_url=server.url + "/v1", api_key="not-needed")
            model = OpenAIChatCompletionsModel(model="scripted", openai_client=client)
            settings = ModelSettings(extra_headers={"X-Memstack-User": "u1", "X-Memstack-Thread": thread})
            assistant = Agent(name="assistant", instructions="You are helpful.", model=model, model_settings=settings)
            return (await Runner.run(assistant, text, run_config=RUN)).final_output

        assert asyncio.run(ask("s1", PROJECT)) == "好的，记住了。"
        memory.flush()
        assert asyncio.run(ask("s2", "我的后端使用什么技术？")) == "你的后端使用 SpringBoot。"
    sent = upstream.calls[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "You are helpful."}
    assert sent[1]["role"] == "system" and PROJECT in sent[1]["content"]  # the proxy's memory of thread s1
    assert sent[-1] == {"role": "user", "content": "我的后端使用什么技术？"}


@pytest.mark.asyncio
async def test_a_streamed_run_gets_the_memory_for_its_own_question_and_is_stored(memory):
    memory.add([PROJECT, {"role": "assistant", "content": "好的。"}], user_id="u1", thread_id="s1")
    memory.flush()
    session = MemstackSession("s2", memory, user_id="u1")
    model = ScriptedAgentModel([tool_call("get_weather", {"city": "杭州"}), "SpringBoot；杭州晴。"])
    streamed = Runner.run_streamed(
        agent(model, session.instructions("Be brief.")), "我的后端用什么？杭州天气呢？", session=session, run_config=RUN
    )
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == "SpringBoot；杭州晴。"
    # in a streamed run the SDK asks for the instructions before it stores the input: the
    # question comes from the run's input, not from the thread
    assert all(PROJECT in call.instructions for call in model.calls) and len(model.calls) == 2
    assert [i.get("type", "message") for i in await session.get_items()] == ["message", "function_call", "function_call_output", "message"]


@pytest.fixture
def dsn():
    from pgsupport import require_dsn

    return require_dsn("OpenAI Agents session")


@pytest.mark.postgres
def test_a_session_on_postgres_through_async_memory_resumes_in_a_new_event_loop(dsn, schema):
    import asyncio

    from memstack import AsyncMemory
    from memstack.backends.postgres import PostgresStore

    memory = AsyncMemory(PostgresStore(dsn, schema=schema, max_size=2), layers="window,retrieval")
    assert memory.native  # the session's reads and writes await psycopg's async pool

    async def first() -> None:
        model = ScriptedAgentModel([tool_call("get_weather", {"city": "上海"}, call_id="call_pg"), "上海晴。"])
        await Runner.run(agent(model), "上海天气？", session=MemstackSession("s1", memory, user_id="u1"), run_config=RUN)

    async def later() -> list:
        session = MemstackSession("s1", memory, user_id="u1")  # another loop: an app restarted
        assert (await session.pop_item())["content"][0]["text"] == "上海晴。"
        return await session.get_items()

    try:
        asyncio.run(first())
        items = asyncio.run(later())
        assert [i.get("type", "message") for i in items] == ["message", "function_call", "function_call_output"]
        assert items[1]["call_id"] == "call_pg" and items[2]["output"] == "上海: 晴, 25°C"
        assert asyncio.run(MemstackSession("s1", memory, user_id="u2").get_items()) == []  # another user: nothing
    finally:
        asyncio.run(memory.close())


@pytest.mark.parametrize("module", ["integrations.openai_agents", "testing.openai_agents"])
def test_without_the_sdk_the_import_names_the_extra_and_the_core_never_imports_it(module):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['agents'] = None\n"
        "from memstack.errors import MissingDependency\n"
        "try:\n"
        f"    import memstack.{module}\n"
        "except MissingDependency as exc:\n"
        "    print(exc.install)\n"
        "import memstack, memstack.testing, memstack.integrations\n"
        "print('agents' in sys.modules and sys.modules['agents'] is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:2] == ['pip install "memstack[openai-agents]"', "False"], out.stderr
