"""The tools' second form and their other doors: the articles' key/value save_memory(key, value) /
recall_memory(key) on the SQLite default with the real local embedder; both forms as LangChain
StructuredTools run from a model's tool calls (LangGraph's ToolNode); saved memories carried by
export and import into a fresh store; the key/value form served by the REST tools API."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory
from memstack.errors import UnknownName
from memstack.saved import KEY_PREFIX, NOTES_THREAD, key_id
from memstack.tools import FORMS, KeyValueTools, MemoryTools, memory_tools

T0 = datetime(2026, 11, 2, 20, 5, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture
def mem(tmp_path):
    m = Memory(tmp_path / "m.db")
    yield m
    m.close()


def kv(mem, user="u1", thread="s1", at=T0):
    return KeyValueTools(mem, user, thread, clock=lambda: at)


def notes(mem, user="u1", thread="s1", at=T0):
    return MemoryTools(mem, user, thread, clock=lambda: at)


# ---- the key/value form ------------------------------------------------------------------------


def test_a_value_is_put_and_got_back_exactly_by_its_key_and_a_new_value_replaces_it(tmp_path, mem):
    tools = kv(mem)
    assert tools.save_memory("城市", "我住在杭州") == f"saved memory {key_id('城市')} under key '城市': 我住在杭州"
    assert tools.recall_memory("城市") == "我住在杭州"
    tools.save_memory("城市", " 我搬到了上海 ")
    assert tools.recall_memory(" 城市 ") == "我搬到了上海"  # the key as the model wrote it, less spaces
    units = [u for b in mem.store.units.iterate(mem.scope("u1")) for u in b if u.kind == "note"]
    assert [(u.id.startswith(KEY_PREFIX), u.scope.thread_id, u.text, u.metadata["key"]) for u in units] == [
        (True, NOTES_THREAD, "城市: 我搬到了上海", "城市")
    ]
    assert tools.recall_memory("城") == "no memory saved under key '城'"  # exact, not a prefix or a search
    mem.close()
    with Memory(tmp_path / "m.db") as later:  # another process, a week later, another thread
        assert kv(later, thread="s2", at=T0 + timedelta(days=7)).recall_memory("城市") == "我搬到了上海"


def test_key_value_memories_are_found_by_the_note_forms_search_and_forgotten_by_id(mem):
    saved = kv(mem).save_memory("favourite_food", "火锅")
    memory_id = saved.split()[2]
    recalled = notes(mem).recall_memory("我喜欢吃什么？")
    assert f"{memory_id} (saved memory): favourite_food: 火锅" in recalled
    assert notes(mem).forget_memory(memory_id) == f"forgot memory {memory_id}: favourite_food: 火锅"
    assert kv(mem).recall_memory("favourite_food") == "no memory saved under key 'favourite_food'"


def test_another_users_key_is_not_theirs(mem):
    kv(mem, "u1").save_memory("password_hint", "my cat's name")
    assert kv(mem, "u2").recall_memory("password_hint") == "no memory saved under key 'password_hint'"
    assert kv(mem, "u1", thread="other").recall_memory("password_hint") == "my cat's name"


def test_the_key_value_schemas_are_the_articles_names_and_arguments(mem):
    schemas = {t["function"]["name"]: t["function"] for t in kv(mem).openai_tools()}
    assert list(schemas) == ["save_memory", "recall_memory", "forget_memory", "get_state", "set_state"]
    assert schemas["save_memory"]["parameters"]["required"] == ["key", "value"]
    assert list(schemas["save_memory"]["parameters"]["properties"]) == ["key", "value"]
    assert schemas["recall_memory"]["parameters"]["required"] == ["key"]
    assert schemas["save_memory"]["description"].startswith("Save one important piece of information to long-term memory under a key")
    assert {n: s for n, s in schemas.items() if n not in ("save_memory", "recall_memory")} == {
        t["function"]["name"]: t["function"]
        for t in notes(mem).openai_tools()
        if t["function"]["name"] not in ("save_memory", "recall_memory")
    }


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"key": "k"}, "error: invalid arguments for save_memory: value: Field required"),
        ({"key": " ", "value": "v"}, "error: key is empty"),
        ({"key": "k", "value": "  "}, "error: value is empty"),
        ({"key": "k\n", "value": "v"}, "saved memory note-key-"),  # surrounding whitespace is not part of the key
        ({"key": "a\tb", "value": "v"}, "error: key must be at most 128 characters without control characters"),
        ({"key": "k" * 129, "value": "v"}, "error: key must be at most 128 characters"),
        ({"content": "x"}, "error: invalid arguments for save_memory: key: Field required"),
    ],
)
def test_a_models_mistake_with_the_key_value_form_is_an_error_string(mem, arguments, expected):
    assert kv(mem).call("save_memory", arguments).startswith(expected)


def test_forms_by_name(mem):
    assert type(memory_tools(mem, "u1", form="key-value")) is KeyValueTools and type(memory_tools(mem, "u1")) is MemoryTools
    assert set(FORMS) == {"notes", "key-value"}
    with pytest.raises(UnknownName, match="unknown tool form 'kv'; expected one of notes, key-value"):
        memory_tools(mem, "u1", form="kv")


def test_the_json_action_chat_loop_runs_the_key_value_form(mem):
    from memstack.testing import ScriptedModel
    from memstack.tool_chat import run_tool_chat

    def act(name, **arguments):
        return json.dumps({"action": name, "arguments": arguments}, ensure_ascii=False)

    model = ScriptedModel(
        [act("save_memory", key="城市", value="杭州"), json.dumps({"action": "answer", "answer": "记住了"}, ensure_ascii=False)]
    )
    out = run_tool_chat(model, kv(mem), [{"role": "user", "content": "记住：我住在杭州"}])
    assert out.answer == "记住了" and "save_memory(key, value)" in model.calls[0]["messages"][0]["content"]
    assert kv(mem).recall_memory("城市") == "杭州"


# ---- LangChain -------------------------------------------------------------------------------


def tool_call(name, call_id, **args):
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def test_langchain_structured_tools_run_a_models_tool_calls(mem):
    pytest.importorskip("langchain_core", reason='pip install "memstack[langchain]"')
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    for tools in (kv(mem), notes(mem)):
        lc = tools.langchain_tools()
        assert all(isinstance(t, StructuredTool) for t in lc)
        assert [convert_to_openai_tool(t) for t in lc] == tools.openai_tools()  # what bind_tools sends: the same schemas

    # a model's turn with tool calls, as bind_tools models return it, run by LangGraph's ToolNode
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(kv(mem).langchain_tools()))
    graph.add_edge(START, "tools")
    node = graph.compile()
    saved = node.invoke({"messages": [AIMessage("", tool_calls=[tool_call("save_memory", "c1", key="技术栈", value="SpringBoot")])]})[
        "messages"
    ][1:]
    assert [(type(m), m.tool_call_id, m.content.startswith("saved memory note-key-")) for m in saved] == [(ToolMessage, "c1", True)]
    calls = [
        tool_call("recall_memory", "c2", key="技术栈"),
        tool_call("recall_memory", "c3", key="数据库"),
        tool_call("save_memory", "c4", key="x"),
    ]
    results = {m.tool_call_id: m.content for m in node.invoke({"messages": [AIMessage("", tool_calls=calls)]})["messages"][1:]}
    assert results["c2"] == "SpringBoot" and results["c3"] == "no memory saved under key '数据库'"
    assert results["c4"] == "error: invalid arguments for save_memory: value: Field required"

    # the note form through one StructuredTool invocation with a ToolCall: a ToolMessage back
    save, recall = notes(mem).langchain_tools()[:2]
    message = save.invoke(tool_call("save_memory", "c5", content="我平时喜欢跑步", category="hobby"))
    assert (
        isinstance(message, ToolMessage)
        and message.content.startswith("saved memory note-")
        and message.content.endswith("(hobby): 我平时喜欢跑步")
    )
    assert "我平时喜欢跑步" in recall.invoke({"query": "我喜欢什么运动？", "k": 3})
    assert recall.invoke({"query": " "}) == "error: query is empty"  # a memstack error is the model's to read


# ---- export and import -------------------------------------------------------------------------


def test_saved_memories_travel_with_export_and_import_into_a_fresh_store(tmp_path, mem):
    mem.add([{"role": "user", "content": "我正在开发一个知识中台"}, {"role": "assistant", "content": "好的"}], user_id="u1", thread_id="s1")
    note = notes(mem).save_memory("我的后端使用SpringBoot", category="tech")
    kv(mem).save_memory("城市", "杭州")
    exported = list(mem.export(user_id="u1"))
    assert [r.get("type") for r in exported] == [None, None, "note", "note"]
    assert (
        exported[2]["text"] == "我的后端使用SpringBoot" and exported[2]["category"] == "tech" and exported[2]["thread_id"] == NOTES_THREAD
    )
    assert exported[3]["metadata"]["key"] == "城市"
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in exported)  # what `memstack export` prints

    with Memory(tmp_path / "fresh.db") as fresh:
        records = [json.loads(line) for line in text.splitlines()]
        assert fresh.import_(records) == 4
        assert fresh.import_(records) == 0  # again: nothing new
        assert kv(fresh, thread="s9").recall_memory("城市") == "杭州"
        recalled = notes(fresh, thread="s9").recall_memory("我的后端用什么技术？")
        assert f"{note.split()[2].rstrip(':')} (saved memory, tech): 我的后端使用SpringBoot" in recalled
        assert [r for r in fresh.export(user_id="u1")] == exported


def test_a_bad_saved_memory_record_is_refused_before_anything_is_written(tmp_path, mem):
    notes(mem).save_memory("我喜欢吃火锅")
    good = list(mem.export(user_id="u1"))
    bad = {**good[0], "id": "f-123"}
    with Memory(tmp_path / "fresh.db") as fresh:
        with pytest.raises(Exception, match=r"record 2: a saved memory's id starts with 'note-'") as caught:
            fresh.import_([good[0], bad])
        assert getattr(caught.value, "field", None) == "records[1].id"
        assert list(fresh.export(user_id="u1")) == []


# ---- the REST tools API ------------------------------------------------------------------------


def test_the_rest_tools_api_serves_the_key_value_form(tmp_path):
    pytest.importorskip("fastapi", reason="pip install 'memstack[server]'")
    from fastapi.testclient import TestClient

    from memstack.server import ServerConfig, create_app
    from memstack.testing import ScriptedModel

    with (
        Memory(tmp_path / "s.db") as memory,
        TestClient(create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), worker=False))) as c,
    ):
        listed = c.get("/v1/tools", params={"form": "key-value"}).json()
        assert [t["function"]["parameters"]["required"] for t in listed[:2]] == [["key", "value"], ["key"]]
        assert c.get("/v1/tools").json()[0]["function"]["parameters"]["required"] == ["content"]
        u = "/v1/users/u1/tools"
        assert (
            c.post(f"{u}/save_memory", params={"form": "key-value"}, json={"arguments": {"key": "城市", "value": "杭州"}})
            .json()["result"]
            .startswith("saved memory")
        )
        assert c.post(f"{u}/recall_memory", params={"form": "key-value"}, json={"arguments": {"key": "城市"}}).json() == {
            "tool": "recall_memory",
            "result": "杭州",
        }
        assert "城市: 杭州" in c.post(f"{u}/recall_memory", json={"arguments": {"query": "我住在哪个城市？"}}).json()["result"]
        assert c.get("/v1/tools", params={"form": "kv"}).status_code == 422
        exported = c.get("/v1/users/u1/export").json()["records"]
        assert [r["type"] for r in exported] == ["note"]


# ---- the MCP server ----------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_memstack_mcp_serves_the_key_value_form(tmp_path):
    pytest.importorskip("mcp", reason='pip install "memstack[mcp]"')
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-m", "memstack", "mcp", "--user", "u1", "--tools", "key-value"], env={"MEMSTACK_HOME": str(tmp_path)}
    )

    async def session_run():
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = {t.name: t.input_schema for t in (await session.list_tools()).tools}
            saved = await session.call_tool("save_memory", {"key": "城市", "value": "杭州"})
            recalled = await session.call_tool("recall_memory", {"key": "城市"})
            return listed, saved, recalled

    listed, saved, recalled = anyio.run(session_run)
    assert list(listed["save_memory"]["properties"]) == ["key", "value"] and list(listed["recall_memory"]["properties"]) == ["key"]
    assert not saved.is_error and saved.content[0].text.startswith("saved memory note-key-")
    assert recalled.content[0].text == "杭州"
    with Memory(tmp_path / "memstack.db") as mem:  # the server's store, read by another process
        assert kv(mem).recall_memory("城市") == "杭州"


def test_memstack_export_and_import_carry_saved_memories_to_a_fresh_home(tmp_path):
    import os
    import subprocess
    import sys

    def memstack(home, *args, input=None):
        env = {**os.environ, "MEMSTACK_HOME": str(home)}
        proc = subprocess.run([sys.executable, "-m", "memstack", *args], input=input, capture_output=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout.decode()

    old, new = tmp_path / "old", tmp_path / "new"
    memstack(old, "add", "--user", "u1", "--thread", "s1", "--role", "user", "我正在开发一个知识中台")
    with Memory(old / "memstack.db") as mem:
        kv(mem).save_memory("城市", "杭州")
        notes(mem).save_memory("我平时喜欢跑步", category="hobby")
    dump = memstack(old, "export", "--user", "u1")
    assert [json.loads(line).get("type") for line in dump.splitlines()] == [None, "note", "note"]
    assert memstack(new, "import", "-", input=dump.encode()).strip() == "imported 3 of 3 records"
    assert memstack(new, "import", "-", input=dump.encode()).strip() == "imported 0 of 3 records (3 already stored)"
    with Memory(new / "memstack.db") as fresh:
        assert kv(fresh).recall_memory("城市") == "杭州"
        assert "(saved memory, hobby): 我平时喜欢跑步" in notes(fresh).recall_memory("我喜欢什么运动？")
