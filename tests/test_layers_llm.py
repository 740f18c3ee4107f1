"""The model-backed layers' orchestration with a scripted model: batching, one call per batch,
grounding, merging, superseding, audit, usage, and failures that lose nothing."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from chats import system, turns_from

from memstack import Memory
from memstack.layers.extractor import Extractor
from memstack.testing import ScriptedModel

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)

PROJECT = [
    "我正在开发一个知识中台",
    "好的，听起来不错。",
    "后端使用SpringBoot",
    "明白。",
    "文档检索使用Elasticsearch",
    "好的。",
    "缓存使用Redis",
    "收到。",
]


turns = turns_from(T0)


def out(*statements, state=None):
    """The model's answer: statements as (subject, type, predicate, object), and state items."""
    body = {}
    if statements or state is None:
        body["memories"] = [{"subject": s, "subject_type": t, "predicate": p, "object": o} for s, t, p, o in statements]
    if state is not None:
        body["state"] = [{"key": k, "value": v} for k, v in state]
    return json.dumps(body, ensure_ascii=False)


def convo(ctx):
    return [m.text for m in ctx.messages if m.role != "system"]


def memory(layers, model, **options):
    return Memory("memory://", layers=layers, options={"model": model, **options})


def test_summary_waits_for_a_full_batch_then_one_call_covers_it():
    model = ScriptedModel([out(("用户", "人物", "正在开发", "一个知识中台"), ("知识中台", "项目", "后端使用", "SpringBoot"))])
    mem = memory(["summary"], model, batch_messages=4)
    mem.add(turns(PROJECT[:2]), user_id="u", thread_id="t")
    mem.run_jobs()
    assert model.calls == []  # two messages: the batch is not full yet
    mem.add(turns(PROJECT[2:4], T0 + timedelta(minutes=2)), user_id="u", thread_id="t")
    mem.run_jobs()
    assert len(model.calls) == 1
    prompt = model.calls[0]["messages"][-1]["content"]
    assert "2024-03-01" in prompt and "后端使用SpringBoot" in prompt  # dates from the messages
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary", max_tokens=2000)
    assert "知识中台后端使用SpringBoot" in system(ctx)
    assert convo(ctx) == []  # all four turns are covered by the summary
    assert ctx.dropped and "covered by the summary" in ctx.dropped[0].reason


def test_summary_buffer_keeps_the_newest_turns_raw_and_does_not_repeat_them():
    model = ScriptedModel([out(("用户", "人物", "正在开发", "一个知识中台"), ("缓存", "技术", "使用", "Redis"))])
    mem = memory(["summary-buffer"], model, batch_messages=8, buffer_tokens=20)
    mem.add(turns(PROJECT), user_id="u", thread_id="t")
    mem.flush()
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary-buffer", max_tokens=2000)
    assert convo(ctx) == ["缓存使用Redis", "收到。"]
    text = system(ctx)
    assert "知识中台" in text and "缓存使用Redis" not in text  # the raw turn is not repeated


def test_flush_takes_a_partial_batch():
    model = ScriptedModel([out(("用户", "人物", "叫", "李四"))])
    mem = memory(["summary"], model, batch_messages=50)
    mem.add(turns(["我叫李四", "你好李四"]), user_id="u", thread_id="t")
    mem.run_jobs()
    assert model.calls == []
    mem.flush()
    assert len(model.calls) == 1
    assert mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"][0]["text"] == "用户叫李四"


def test_a_quiet_threads_partial_batch_runs_without_a_flush():
    # a short session through the service: the background worker runs its held-back turns once the
    # thread has been quiet for idle_seconds, not only at a flush
    model = ScriptedModel([out(("用户", "人物", "叫", "李四"))])
    mem = Memory("memory://", layers=["summary"], options={"model": model, "batch_messages": 50}, idle_seconds=0.5)
    mem.add(turns(["我叫李四", "你好李四"]), user_id="u", thread_id="t")
    mem.run_jobs()
    assert model.calls == []  # not quiet yet: the batch waits for more turns
    mem.start_worker(poll_seconds=0.05)
    try:
        deadline = time.monotonic() + 10
        while not model.calls and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        mem.stop_worker()
    assert len(model.calls) == 1
    assert mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"][0]["text"] == "用户叫李四"
    mem.run_jobs()
    assert len(model.calls) == 1  # done: not run again
    held = Memory("memory://", layers=["summary"], options={"model": model, "batch_messages": 50}, idle_seconds=None)
    held.add(turns(["我叫王五", "你好王五"]), user_id="u", thread_id="t")
    time.sleep(0.1)
    held.run_jobs()
    assert len(model.calls) == 1  # None: only a flush takes a partial batch


def test_one_call_per_batch_feeds_every_layer():
    extraction = out(
        ("用户", "人物", "正在开发", "知识中台"), ("知识中台", "项目", "后端使用", "SpringBoot"), state=[("当前项目", "知识中台")]
    )
    model = ScriptedModel([extraction])
    mem = memory(["summary", "entities", "graph", "state"], model, batch_messages=4)
    mem.add(turns(PROJECT[:4]), user_id="u", thread_id="t")
    mem.run_jobs()
    assert len(model.calls) == 1
    user = mem.scope("u")
    assert {r.key for r in mem.store.records.current(user, "entity")} == {"user", "知识中台", "springboot"}
    assert mem.store.records.current(user, "state")[0].value == {"value": "知识中台"}
    relations = mem.store.records.current(user, "relation")
    assert {(r.value["source"], r.value["target"]) for r in relations} == {("用户", "知识中台"), ("知识中台", "SpringBoot")}
    # "后端使用SpringBoot" does not name 知识中台: grounded by the batch, with a lower confidence
    assert {r.value["target"]: r.value["confidence"] for r in relations} == {"知识中台": 0.9, "SpringBoot": 0.6}
    summary = mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"]
    assert [i["text"] for i in summary] == ["用户正在开发知识中台", "知识中台后端使用SpringBoot"]
    usage = mem.store.usage.read(user)
    assert len(usage) == 1 and usage[0].ok and usage[0].prompt_tokens > 0 and usage[0].layer == "extract"


def test_entities_are_kept_only_when_said_and_merge_under_one_name():
    model = ScriptedModel(
        [
            out(("Redis", "技术", "用于", "缓存"), ("Kafka", "技术", "用于", "消息队列")),
            out(("redis", "技术", "又名", "雷迪斯"), ("redis", "技术", "用途", "缓存")),
        ]
    )
    mem = memory(["entities"], model, batch_messages=2)
    mem.add(turns(["缓存使用Redis", "好的"]), user_id="u", thread_id="t")
    mem.run_jobs()
    mem.add(turns(["redis（雷迪斯）只做缓存", "明白"], T0 + timedelta(days=1)), user_id="u", thread_id="t2")
    mem.run_jobs()
    current = {r.key: r for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "kafka" not in current and "消息队列" not in current  # never said: not stored
    assert set(current) == {"redis", "缓存"}  # a short Chinese object is a thing too
    redis = current["redis"].value
    assert redis["aliases"] == ["雷迪斯"] and redis["attributes"]["用途"]["value"] == "缓存"
    assert redis["attributes"]["用途"]["valid_from"].startswith("2024-03-02")
    assert len(mem.store.records.history(mem.scope("u"), "entity", "redis")) == 2
    ctx = mem.context(user_id="u", thread_id="t3", strategy="entities", query="Redis用来做什么？", max_tokens=1000)
    assert "Redis" in system(ctx) and "用途=缓存" in system(ctx)


def test_a_changed_attribute_supersedes_and_the_old_value_stays_in_history_and_audit():
    model = ScriptedModel(
        [
            out(("用户", "人物", "城市", "北京")),
            out(("用户", "人物", "城市", "上海")),
        ]
    )
    mem = memory(["entities"], model, batch_messages=2)
    mem.add(turns(["我住在北京", "好的"]), user_id="u", thread_id="t")
    mem.run_jobs()
    mem.add(turns(["我搬到上海了", "恭喜"], T0 + timedelta(days=30)), user_id="u", thread_id="t")
    mem.run_jobs()
    history = mem.store.records.history(mem.scope("u"), "entity", "user")
    assert [h.value["attributes"]["城市"]["value"] for h in history] == ["北京", "上海"]
    assert history[0].invalid_at is not None and history[1].current
    events = [e for e in mem.store.records.audit(mem.scope("u"), kind="entity") if e.key == "user"]
    assert events[0].action == "supersede" and events[0].before["attributes"]["城市"]["value"] == "北京"


def test_graph_renders_the_multi_hop_path_through_an_alias():
    text = ["小李是一名程序员。莫尔索是小李的笔名。小李正在开发知识中台。知识中台后端使用SpringBoot。", "好的，记住了。"]
    model = ScriptedModel(
        [
            out(
                ("小李", "人物", "是", "程序员"),
                ("莫尔索", "人物", "是笔名", "小李"),
                ("小李", "人物", "开发", "知识中台"),
                ("知识中台", "项目", "后端使用", "SpringBoot"),
                ("知识中台", "项目", "部署在", "火星"),
            )
        ]
    )
    mem = memory(["graph"], model, batch_messages=2)
    mem.add(turns(text), user_id="u", thread_id="t")
    mem.run_jobs()
    relations = mem.store.records.current(mem.scope("u"), "relation")
    assert len(relations) == 4  # the invented one is not grounded
    assert any("知识中台后端使用SpringBoot" in r.value["evidence"] and r.source_ids and r.value["confidence"] == 0.9 for r in relations)
    ctx = mem.context(user_id="u", thread_id="t2", strategy="graph", query="莫尔索开发的项目用什么后端？", max_tokens=1000)
    section = system(ctx)
    for piece in ("莫尔索 —是笔名→ 小李", "小李 —开发→ 知识中台", "知识中台 —后端使用→ SpringBoot"):
        assert piece in section
    assert mem.store.records.current(mem.scope("u"), "entity", ["小李"])[0].value["aliases"] == ["莫尔索"]


def test_graph_hops_are_bounded_and_alias_edges_are_free():
    from memstack.layers.graph import neighbourhood
    from memstack.types import Record, Scope

    user = Scope(user_id="u")

    def rel(i, s, t, alias=False):
        return Record(
            f"r{i}",
            user,
            "relation",
            f"{s}-{t}",
            {"source_key": s, "target_key": t, "source": s, "target": t, "relation": "x", "alias": alias},
        )

    chain = [rel(0, "a", "alias-of-a", alias=True), rel(1, "alias-of-a", "b"), rel(2, "b", "c"), rel(3, "c", "d"), rel(4, "d", "e")]
    found = {r.id for r in neighbourhood({"a"}, chain, 3)}
    assert found == {"r0", "r1", "r2", "r3"}  # e is 4 hops away


def test_state_is_merged_key_by_key_and_every_change_is_audited():
    model = ScriptedModel([out(state=[("当前任务", "写接口文档"), ("偏好语言", "中文")]), out(state=[("当前任务", "部署上线")])])
    mem = memory(["state"], model, batch_messages=2)
    mem.add(turns(["我在写接口文档，请用中文回复", "好的"]), user_id="u", thread_id="t")
    mem.run_jobs()
    mem.add(turns(["文档写完了，现在要部署上线", "好的"], T0 + timedelta(hours=5)), user_id="u", thread_id="t")
    mem.run_jobs()
    from memstack.layers.state import current_state

    assert current_state(mem.store, mem.scope("u")) == {"偏好语言": "中文", "当前任务": "部署上线"}
    assert [r.key for r in mem.memories("state", user_id="u")] == ["偏好语言", "当前任务"]
    assert mem.audit(user_id="u", kind="state")[0].after == {"value": "部署上线"}
    assert len(mem.usage(user_id="u")) == 2
    actions = [(e.key, e.action) for e in mem.store.records.audit(mem.scope("u"), kind="state")]
    assert actions[0] == ("当前任务", "supersede") and ("偏好语言", "add") in actions
    ctx = mem.context(user_id="u", thread_id="t", strategy="state", max_tokens=1000)
    assert "部署上线" in system(ctx)


def test_a_state_schema_limits_the_keys():
    model = ScriptedModel([out(state=[("mood", "happy"), ("task", "docs")])])
    mem = memory(["state"], model, batch_messages=2, state_schema={"type": "object", "properties": {"task": {"type": "string"}}})
    mem.add(turns(["I'm writing the docs today, happily", "ok"]), user_id="u", thread_id="t")
    mem.run_jobs()
    assert [r.key for r in mem.store.records.current(mem.scope("u"), "state")] == ["task"]


def test_malformed_output_fails_the_job_records_the_failure_and_loses_no_turn():
    answers: list[str] = []
    model = ScriptedModel([], default=lambda messages, schema: answers.pop(0) if answers else "{not json")
    mem = memory(["summary"], model, batch_messages=2)
    mem.add(turns(["我叫李四", "你好，李四同学"]), user_id="u", thread_id="t")
    report = mem.run_jobs()
    assert report.failed == 1 and "stays queued" in report.errors[0]
    # the batch of two was tried whole, then halved: each attempt is a call with a retry
    assert len(model.calls) == 4
    assert mem.store.records.current(mem.scope("u", "t"), "summary") == []
    failed = mem.store.usage.read(mem.scope("u"))
    assert len(failed) == 4 and not any(u.ok for u in failed) and failed[0].error
    assert mem.store.jobs.pending(mem.scope("u")) == 1  # still queued
    answers.append(out(("用户", "人物", "叫", "李四")))
    time.sleep(2.1)  # the first retry's backoff
    assert mem.run_jobs().ran == 1
    assert mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"][0]["text"] == "用户叫李四"


def test_a_batch_whose_names_are_clauses_is_split_at_a_round():
    # the local model, given two long English rounds, wrote their sentences where names go
    # ("Anand Iyer is a test lead in Pune with two kids, Aditya and Meera|=needs|=walking daily")
    clauses = out(
        ("Tom Reyes is a nurse in Leeds with two kids, and his BP is high", "人物", "=needs", "=walking daily"),
        ("Lena is a teacher, and her office is far", "人物", "=not", "=having the same problem"),
    )
    model = ScriptedModel([clauses, out(("User", "person", "lives in", "Leeds")), out(("User", "person", "drives", "Toyota"))])
    mem = memory(["entities"], model, batch_messages=4)
    mem.add(
        turns(
            [
                "I'm Tom Reyes, a nurse, and I live in Leeds with two kids.",
                "Hi Tom!",
                "My BP is high, and I drive a Toyota to work now.",
                "Good.",
            ]
        ),
        user_id="u",
        thread_id="t",
    )
    assert mem.run_jobs().failed == 0
    assert len(model.calls) == 3  # the whole batch, then one round each
    me = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    assert set(me) == {"lives in", "drives"}
    usage = mem.store.usage.read(mem.scope("u"))
    assert [u.error for u in usage] == ["the model wrote clauses for names", None, None]


def test_a_batch_whose_only_statement_has_a_clause_for_a_name_is_split_at_a_round():
    clause = out(("I remember writing to my manager to move our one-to-ones to", "人物", "Wednesday", "from Mondays"))
    model = ScriptedModel([clause, out(("User", "person", "lives in", "Cork")), out()])
    mem = memory(["entities"], model, batch_messages=4)
    mem.add(
        turns(["I live in Cork and I work in insurance.", "Nice.", "I moved our one-to-ones to Wednesday.", "Good."]),
        user_id="u",
        thread_id="t",
    )
    assert mem.run_jobs().failed == 0
    assert len(model.calls) == 3  # the whole batch, then one round each
    me = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    assert set(me) == {"lives in"}


def test_a_rerun_batch_writes_nothing_twice():
    extraction = out(("李四", "人物", "是", "用户"))
    model = ScriptedModel([extraction, extraction])
    store_mem = memory(["summary", "entities"], model, batch_messages=2)
    store_mem.add(turns(["我叫李四", "你好李四"]), user_id="u", thread_id="t")
    scope = store_mem.scope("u", "t")
    extractor = Extractor(store=store_mem.store, model=model, stack=("summary", "entities"), batch_messages=2)
    from memstack.layers.base import WriteRequest

    messages = store_mem.store.history.read(scope)
    for _ in range(2):  # a worker killed after applying, before completing: the job runs again
        extractor.write(WriteRequest(scope, messages, True, store_mem.store, 0))
    summary = store_mem.store.records.current(scope, "summary")[0].value
    assert [i["text"] for i in summary["items"]] == ["李四是用户"]
    assert len(store_mem.store.records.audit(store_mem.scope("u"), kind="entity")) == 1


def test_long_batches_are_cut_to_fit_the_models_window():
    model = ScriptedModel([], default=out(("x", "y", "z", "w")), context_window=1200)
    mem = memory(["summary"], model, batch_messages=1000, batch_tokens=100000, output_tokens=256)
    mem.add(turns([("这是一段很长的话。" * 40) for _ in range(12)]), user_id="u", thread_id="t")
    mem.flush()
    assert len(model.calls) > 1
    for call in model.calls:
        assert sum(model.count_tokens(m["content"]) for m in call["messages"]) + 256 <= 1200


def test_a_store_without_records_is_refused_with_a_clear_error(tmp_path):
    from memstack.errors import UsageError

    with pytest.raises(UsageError, match="keeps no model-made memory"):
        Memory(f"jsonl://{tmp_path}", layers=["summary"], options={"model": ScriptedModel([])})


def malformed_outputs(n=200):
    """Deterministic junk: a valid extraction truncated at many points, with braces and quotes
    broken, wrapped in prose, wrong types, empty and non-JSON text."""
    valid = out(("用户", "人物", "叫", "李四"), ("李四", "人物", "是", "软件工程师"), ("User", "person", "lives in", "Hangzhou"))
    outs = []
    for i in range(1, len(valid), max(1, len(valid) // 60)):
        outs.append(valid[:i])  # truncated
    outs += [valid.replace('"', "", k) for k in range(1, 40, 3)]  # quotes dropped
    outs += [valid.replace("}", "", k) for k in range(1, 4)] + [valid.replace("[", "{", k) for k in range(1, 4)]
    outs += [
        "",
        "   ",
        "null",
        "[]",
        "好的，我来总结一下。",
        "```json\n```",
        '{"facts": "不是列表"}',
        '{"facts": [1, 2, {"x": 3}]}',
        '{"entities": [{"name": null}]}',
        "{" * 500,
        "\ud800\udfff junk",
        "<think>嗯</think>",
    ]
    outs += [f"以下是结果：{valid[: len(valid) // 2]}……" for _ in range(5)]
    while len(outs) < n:
        outs.append(valid[::-1][: len(outs) % 97 + 3])
    return outs[:n]


def test_two_hundred_malformed_outputs_lose_no_turn():
    from memstack.errors import JobError
    from memstack.layers.base import WriteRequest

    outputs = malformed_outputs()
    model = ScriptedModel([], default=lambda messages, schema: outputs.pop(0) if outputs else "{")
    mem = memory(["summary", "entities"], model, batch_messages=2)
    mem.add(turns(["我叫李四，是软件工程师，住在杭州", "你好李四"]), user_id="u", thread_id="t")
    scope = mem.scope("u", "t")
    extractor = Extractor(store=mem.store, model=model, stack=("summary", "entities"), batch_messages=2)
    messages = mem.store.history.read(scope)
    outcomes = {"stored": 0, "failed": 0}
    while outputs:
        try:
            extractor.write(WriteRequest(scope, messages, True, mem.store, 0))
            outcomes["stored"] += 1
        except JobError:
            outcomes["failed"] += 1  # reported; the queue keeps the batch for a retry
    assert outcomes["failed"] > 0 and sum(outcomes.values()) >= 30
    usage = mem.store.usage.read(mem.scope("u"))
    assert len(usage) == len(model.calls) and sum(not u.ok for u in usage) >= outcomes["failed"]
    assert len(mem.store.history.read(scope)) == 2  # no turn lost
    for r in mem.store.records.current(mem.scope("u"), "entity"):
        assert r.value["name"] and r.source_ids  # whatever was stored is well-formed and grounded
    # and the queue still holds the work: a job run with a good answer stores it
    model2 = ScriptedModel([out(("用户", "人物", "叫", "李四"))])
    Extractor(store=mem.store, model=model2, stack=("summary",), batch_messages=2).write(WriteRequest(scope, messages, True, mem.store, 0))
    assert any(i["text"] == "用户叫李四" for i in mem.store.records.current(scope, "summary")[0].value["items"])


def test_one_message_longer_than_the_models_window_is_cut_not_sent_whole():
    model = ScriptedModel([], default=out(("x", "y", "z", "w")), context_window=1200)
    mem = memory(["summary"], model, batch_messages=1, output_tokens=256)
    mem.add([{"role": "user", "content": "这是一段非常长的话，讲了很多事情。" * 300}], user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    assert len(model.calls) > 2
    for call in model.calls:
        assert sum(model.count_tokens(m["content"]) for m in call["messages"]) + 256 <= 1200


def test_extracted_facts_become_retrieval_keys_pointing_to_their_turns():
    model = ScriptedModel([out(("用户", "人物", "的职业是", "软件工程师"))])
    mem = memory(["summary", "retrieval"], model, batch_messages=2)
    stored = mem.add(turns(["说起来，我现在每天写代码，做的是软件工程师的工作", "很好"]), user_id="u", thread_id="t")
    mem.run_jobs()
    facts = [u for batch in mem.store.units.iterate(mem.scope("u")) for u in batch if u.kind == "fact"]
    assert [f.text for f in facts] == ["用户的职业是软件工程师"] and facts[0].source_ids == (stored[0].id,)
    hits = mem.search("我的职业是什么？", user_id="u")
    assert hits and stored[0].id in {i for h in hits for i in h.unit.source_ids}
    ctx = mem.context(user_id="u", thread_id="t2", strategy="retrieval", query="我的职业是什么？", max_tokens=1000)
    assert "说起来，我现在每天写代码，做的是软件工程师的工作" in system(ctx)
    assert "用户的职业是软件工程师" not in system(ctx)  # the key's sentence beside the turn it points to only repeats it


def test_state_can_be_kept_per_thread():
    model = ScriptedModel([out(state=[("当前任务", "写接口文档")]), out(state=[("当前任务", "修复登录问题")])])
    mem = memory(["state"], model, batch_messages=2, state_per_thread=True)
    mem.add(turns(["这个会话里我在写接口文档", "好的"]), user_id="u", thread_id="docs")
    mem.add(turns(["这个会话里我在修复登录问题", "好的"]), user_id="u", thread_id="bugs")
    mem.run_jobs()
    from memstack.layers.state import current_state

    assert current_state(mem.store, mem.scope("u", "docs"), per_thread=True) == {"当前任务": "写接口文档"}
    assert current_state(mem.store, mem.scope("u", "bugs"), per_thread=True) == {"当前任务": "修复登录问题"}
    assert current_state(mem.store, mem.scope("u")) == {}
    assert "修复登录问题" in system(mem.context(user_id="u", thread_id="bugs", strategy="state", max_tokens=500))


def test_a_flush_with_a_broken_model_fails_once_and_does_not_spin():
    model = ScriptedModel([], default="我不会输出 JSON")
    mem = memory(["summary"], model, batch_messages=10)
    mem.add(turns(["我叫李四", "你好，李四同学"]), user_id="u", thread_id="t")
    mem.run_jobs()  # the batch is not full: the job waits
    report = mem.run_jobs(final=True, max_jobs=50)
    assert (report.ran, report.failed) == (0, 1)
    assert mem.store.jobs.pending(mem.scope("u")) == 0 and len(mem.history(user_id="u", thread_id="t")) == 2
