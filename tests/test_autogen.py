"""The AutoGen adapter under autogen-agentchat's own AssistantAgent: MemstackMemory (autogen-core's
Memory protocol) bringing an earlier session's memory to the model, on a scripted model client
(``memstack.testing.autogen``) that records what the model received; add, query, clear and the
conversation's messages, with bad input refused by field."""

from __future__ import annotations

import pytest

pytest.importorskip("autogen_agentchat", reason="needs: pip install 'memstack[autogen]'")

from autogen_agentchat.agents import AssistantAgent  # noqa: E402
from autogen_agentchat.messages import MemoryQueryEvent  # noqa: E402
from autogen_core import FunctionCall, Image  # noqa: E402
from autogen_core.memory import MemoryContent, MemoryMimeType  # noqa: E402
from autogen_core.model_context import UnboundedChatCompletionContext  # noqa: E402
from autogen_core.models import (  # noqa: E402
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    SystemMessage,
    UserMessage,
)

from memstack import Memory  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.autogen import MemstackMemory  # noqa: E402
from memstack.testing.autogen import ScriptedChatCompletionClient  # noqa: E402

PROJECT = "我正在开发一个知识中台，后端使用SpringBoot"
PROJECT_EN = "I'm building a knowledge platform and the backend uses SpringBoot"


def get_weather(city: str) -> str:
    """The weather of a city today."""
    return f"{city}: 晴"


@pytest.fixture
def memory(tmp_path):
    with Memory(f"sqlite:///{tmp_path / 'autogen.db'}", layers="window,retrieval") as m:
        yield m


def memory_messages(call) -> list[str]:
    return [m.content for m in call if isinstance(m, SystemMessage) and "SpringBoot" in m.content]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("said", "asked", "answer"),
    [
        (PROJECT + "。杭州天气？", "我的后端使用什么技术？", "好的，记住了。杭州晴。"),
        (PROJECT_EN + ". Weather in Hangzhou?", "What does my backend use?", "Noted. Sunny."),
    ],
    ids=["zh", "en"],
)
async def test_memory_from_an_earlier_session_reaches_the_model_of_an_assistant_agent(memory, said, asked, answer):
    first = MemstackMemory(memory, user_id="u1", thread_id="s1")
    client = ScriptedChatCompletionClient([[FunctionCall(id="c1", name="get_weather", arguments='{"city": "杭州"}')], answer])
    agent = AssistantAgent("assistant", model_client=client, memory=[first], tools=[get_weather], reflect_on_tool_use=True)
    result = await agent.run(task=said)
    stored = await first.add_messages(result.messages)  # the session's conversation, tool call included
    assert [(m.role, m.text) for m in stored] == [("user", said), ("assistant", ""), ("tool", "杭州: 晴"), ("assistant", answer)]
    assert stored[1].tool_calls[0].id == "c1" and stored[2].tool_call_id == "c1"
    memory.flush()  # the retrieval layer's indexing job (a worker does it in an app)

    later = ScriptedChatCompletionClient(["SpringBoot."])
    result = await AssistantAgent("assistant", model_client=later, memory=[MemstackMemory(memory, user_id="u1", thread_id="s2")]).run(
        task=asked
    )
    received = later.calls[0]
    assert isinstance(received[-2], UserMessage) and received[-2].content == asked
    assert isinstance(received[-1], SystemMessage) and said in received[-1].content and answer in received[-1].content
    event = next(m for m in result.messages if isinstance(m, MemoryQueryEvent))
    assert event.content[0].content == received[-1].content and event.content[0].metadata["query"] == asked

    # another user of the same store: nothing of u1's reaches the model
    stranger = ScriptedChatCompletionClient(["?"])
    await AssistantAgent("assistant", model_client=stranger, memory=[MemstackMemory(memory, user_id="u2", thread_id="s2")]).run(task=asked)
    assert memory_messages(stranger.calls[0]) == []


@pytest.mark.asyncio
async def test_add_keeps_saved_memories_and_messages_and_query_searches_every_thread(memory):
    mine = MemstackMemory(memory, user_id="u1", thread_id="s1", k=3)
    await mine.add(MemoryContent(content="用户喜欢打网球", mime_type=MemoryMimeType.TEXT, metadata={"category": "preference"}))
    await mine.add(MemoryContent(content={"language": "中文", "style": "简洁"}, mime_type=MemoryMimeType.JSON))
    await mine.add(MemoryContent(content="My favourite editor is Vim", mime_type="text/markdown", metadata={"role": "user"}))
    assert [m.text for m in memory.history(user_id="u1", thread_id="s1")] == ["My favourite editor is Vim"]

    elsewhere = MemstackMemory(memory, user_id="u1", thread_id="s9")  # saved memories: found at once, from any thread
    found = (await elsewhere.query("我喜欢什么运动？")).results
    assert found[0].content == "用户喜欢打网球" and found[0].metadata["category"] == "preference" and found[0].metadata["kind"] == "note"
    assert found[0].metadata["score"] > 0 and found[0].metadata["id"].startswith("note-")
    assert '"style": "简洁"' in (await elsewhere.query(MemoryContent(content="简洁 style", mime_type="text/plain"))).results[0].content
    assert (await MemstackMemory(memory, user_id="u2", thread_id="s1").query("网球")).results == []

    for content, field in [
        (MemoryContent(content=b"\x89PNG", mime_type=MemoryMimeType.BINARY), "content"),
        (MemoryContent(content=Image.from_base64(PNG), mime_type=MemoryMimeType.IMAGE), "content"),
        (MemoryContent(content="   ", mime_type="text/plain"), "content"),
        (MemoryContent(content="x", mime_type="text/plain", metadata={"role": "robot"}), "role"),
        (MemoryContent(content="x", mime_type="text/plain", metadata={"category": 3}), "category"),
        (MemoryContent(content="nul \x00", mime_type="text/plain"), "content"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            await mine.add(content)
        assert refused.value.field == field
    assert len(memory.history(user_id="u1", thread_id="s1")) == 1


@pytest.mark.asyncio
async def test_update_context_adds_nothing_without_a_question_or_a_memory(memory):
    mine = MemstackMemory(memory, user_id="u1", thread_id="s1")
    context = UnboundedChatCompletionContext()
    assert (await mine.update_context(context)).memories.results == []
    await context.add_message(UserMessage(content="你好", source="user"))
    assert (await mine.update_context(context)).memories.results == []  # nothing remembered yet
    assert len(await context.get_messages()) == 1


@pytest.mark.asyncio
async def test_add_messages_takes_autogen_core_messages_and_refuses_by_position(memory):
    mine = MemstackMemory(memory, user_id="u1", thread_id="s1")
    conversation = [
        SystemMessage(content="你是助手。"),
        UserMessage(content=["北京天气？", Image.from_base64(PNG)], source="user"),
        AssistantMessage(content=[FunctionCall(id="c9", name="get_weather", arguments='{"city": "北京"}')], source="assistant"),
        FunctionExecutionResultMessage(
            content=[FunctionExecutionResult(content="北京: 晴", name="get_weather", call_id="c9", is_error=False)]
        ),
        AssistantMessage(content="北京晴。", source="assistant"),
    ]
    stored = await mine.add_messages(conversation)
    assert [(m.role, m.text) for m in stored] == [
        ("system", "你是助手。"),
        ("user", "北京天气？"),
        ("assistant", ""),
        ("tool", "北京: 晴"),
        ("assistant", "北京晴。"),
    ]
    for bad, field in [(42, "messages[1].type"), (UserMessage(content="", source="user"), "messages[1].content")]:
        with pytest.raises(InvalidInput) as refused:
            await mine.add_messages([UserMessage(content="ok", source="user"), bad])
        assert refused.value.field == field
    assert len(memory.history(user_id="u1", thread_id="s1")) == 5


@pytest.mark.asyncio
async def test_clear_forgets_the_user_and_no_one_else(memory):
    mine = MemstackMemory(memory, user_id="u1", thread_id="s1")
    theirs = MemstackMemory(memory, user_id="u2", thread_id="s1")
    for m in (mine, theirs):
        await m.add(MemoryContent(content="喜欢打网球", mime_type="text/plain"))
        await m.add(MemoryContent(content="hello", mime_type="text/plain", metadata={"role": "user"}))
    await mine.clear()
    assert (await mine.query("网球")).results == [] and memory.threads(user_id="u1") == []
    assert (await theirs.query("网球")).results != [] and len(memory.threads(user_id="u2")) == 1


@pytest.mark.asyncio
async def test_a_memory_opened_from_a_url_is_closed_with_the_adapter(tmp_path):
    url = f"sqlite:///{tmp_path / 'own.db'}"
    owned = MemstackMemory(url, user_id="u1", thread_id="s1")
    await owned.add(MemoryContent(content="记住：周五开会", mime_type="text/plain", metadata={"role": "user"}))
    await owned.close()
    with Memory(url) as reopened:
        assert [m.text for m in reopened.history(user_id="u1", thread_id="s1")] == ["记住：周五开会"]


#: a 1x1 PNG
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@pytest.mark.parametrize("module", ["integrations.autogen", "testing.autogen"])
def test_without_autogen_the_import_names_the_extra_and_the_core_never_imports_it(module):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['autogen_core'] = None\n"
        "from memstack.errors import MissingDependency\n"
        "try:\n"
        f"    import memstack.{module}\n"
        "except MissingDependency as exc:\n"
        "    print(exc.install)\n"
        "import memstack, memstack.testing, memstack.integrations\n"
        "print(sys.modules.get('autogen_core') is not None or 'autogen_agentchat' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[:2] == ['pip install "memstack[autogen]"', "False"], out.stderr
