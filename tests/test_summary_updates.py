"""A correction in the summary: the newer value is shown as current, the older one as past.

Notes derive from subject/predicate/object statements; a newer statement about the same subject in
the same single-valued slot (where one lives, a date, a budget...) supersedes the older note.
Predicates that accumulate (uses, likes) never do. Scripted model, real Extractor and Memory.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from chats import statements

from memstack import Memory
from memstack.testing import ScriptedModel

out = statements


def say(mem, user_text, at, reply="记下了，还有别的吗？"):
    mem.add(
        [
            {"role": "user", "content": user_text, "timestamp": at},
            {"role": "assistant", "content": reply, "timestamp": at},
        ],
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0


def summary_lines(mem):
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary", max_tokens=2000)
    return next(m.text for m in ctx.messages if m.role == "system").splitlines()


def test_a_move_supersedes_where_the_user_lives(tmp_path):
    model = ScriptedModel([out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "已经搬到", "深圳"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "我住在上海", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "我已经搬到深圳了", datetime(2026, 5, 1, 9, tzinfo=timezone.utc).isoformat())
    lines = summary_lines(mem)
    now = next(line for line in lines if "深圳" in line)
    past = next(line for line in lines if "上海" in line and "深圳" not in line.split("（")[0])
    assert "现在" in now and "上海" in now  # current, naming what it replaced
    assert "过去" in past and "2026-05-01" in past  # past, since the day it changed
    assert lines.index(now) < lines.index(past)  # newest first
    items = mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"]
    assert [bool(i.get("superseded_at")) for i in items] == [True, False]


def test_values_that_accumulate_are_not_superseded(tmp_path):
    model = ScriptedModel([out(("知识中台", "项目", "使用", "SpringBoot")), out(("知识中台", "项目", "使用", "Redis"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "知识中台使用SpringBoot", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "知识中台也使用Redis", datetime(2026, 3, 2, 9, tzinfo=timezone.utc).isoformat())
    text = "\n".join(summary_lines(mem))
    assert "SpringBoot" in text and "Redis" in text and "过去" not in text and "现在" not in text


def test_a_rescheduled_date_in_english(tmp_path):
    model = ScriptedModel([out(("launch", "event", "scheduled for", "Friday")), out(("launch", "event", "postponed to", "next Wednesday"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    mem.add(
        [
            {"role": "user", "content": "The launch is scheduled for Friday", "timestamp": "2026-03-01T09:00:00+00:00"},
            {"role": "assistant", "content": "Noted, anything else?", "timestamp": "2026-03-01T09:00:00+00:00"},
        ],
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0
    mem.add(
        [
            {"role": "user", "content": "The launch was postponed to next Wednesday", "timestamp": "2026-03-03T09:00:00+00:00"},
            {"role": "assistant", "content": "Noted, anything else?", "timestamp": "2026-03-03T09:00:00+00:00"},
        ],
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0
    text = "\n".join(summary_lines(mem))
    # "next Wednesday" said on Tuesday 03-03 is 03-11 (llm.extract.dated)
    assert "launch postponed to next Wednesday (2026-03-11) (current; before: Friday)" in text
    assert "launch scheduled for Friday (past: since 2026-03-03" in text


def test_the_merge_sees_which_note_is_outdated(tmp_path):
    merged = json.dumps({"facts": ["用户住在深圳（2026-05-01起；此前住在上海）"]}, ensure_ascii=False)
    model = ScriptedModel([out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "搬到", "深圳")), merged])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2, "summary_tokens": 8})
    say(mem, "我住在上海", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "我搬到深圳了", datetime(2026, 5, 1, 9, tzinfo=timezone.utc).isoformat())
    shown = model.calls[-1]["messages"][-1]["content"]
    assert "用户住在上海（已过时）" in shown and "用户搬到深圳（已过时）" not in shown
    assert "此前住在上海" in "\n".join(summary_lines(mem))


def test_a_switch_said_as_a_change_supersedes_a_value_that_otherwise_accumulates(tmp_path):
    model = ScriptedModel([out(("服务", "项目", "使用", "Java")), out(("服务", "项目", "改用", "Go"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "我们的服务使用Java", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "服务已经全部改用Go重写了", datetime(2026, 4, 1, 9, tzinfo=timezone.utc).isoformat())
    text = "\n".join(summary_lines(mem))
    assert "服务改用Go（现在的情况；此前：Java）" in text
    assert "服务使用Java（过去的情况：2026-04-01起改为 服务改用Go）" in text


def test_a_change_that_names_only_its_topic_supersedes_the_value_said_of_that_topic(tmp_path):
    """The articles' 知识中台: "缓存改用Memcached了" beside 使用 SpringBoot, Elasticsearch and Redis.
    The change names none of them; the words each was said in do ("…，缓存使用Redis")."""
    model = ScriptedModel(
        [
            out(
                ("知识中台", "项目", "使用", "SpringBoot"),
                ("知识中台", "项目", "使用", "Elasticsearch"),
                ("知识中台", "项目", "使用", "Redis"),
            ),
            out(("知识中台", "项目", "改用", "Memcached")),
        ]
    )
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(
        mem,
        "知识中台后端使用SpringBoot，文档检索使用Elasticsearch，缓存使用Redis。",
        datetime(2026, 11, 2, 9, tzinfo=timezone.utc).isoformat(),
    )
    say(mem, "缓存改用Memcached了。", datetime(2026, 11, 9, 9, tzinfo=timezone.utc).isoformat())
    text = "\n".join(summary_lines(mem))
    assert "知识中台使用Redis（过去的情况" in text, text
    assert "知识中台使用SpringBoot（过去" not in text and "知识中台使用Elasticsearch（过去" not in text, text


def test_notes_of_a_batch_the_verification_changed_still_carry_their_statements(tmp_path):
    """The local model's C6: it wrote "用户|使用Redis|用户", which the verification splits back into
    用户|使用|Redis; the notes must carry the verified statements (before, they were looked up among the
    model's raw ones, carried none, and so the change superseded nothing)."""
    model = ScriptedModel(
        [
            out(
                ("用户", "人物", "正在开发知识中台", "用户"),
                ("用户", "人物", "使用SpringBoot", "用户"),
                ("用户", "人物", "使用Redis", "用户"),
            ),
            out(("用户", "人物", "使用", "Memcached")),
        ]
    )
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "我正在开发知识中台，后端使用SpringBoot，缓存使用Redis。", datetime(2026, 11, 2, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "缓存改用Memcached了。", datetime(2026, 11, 9, 9, tzinfo=timezone.utc).isoformat())
    text = "\n".join(summary_lines(mem))
    assert "用户使用Redis（过去的情况" in text, text
    assert "用户使用SpringBoot（过去" not in text, text
    assert [e.after["reason"] for e in mem.store.records.audit(mem.scope("u"), kind="rejected")] == ["the subject is its own object"]


def said_in_threads(mem, *said):
    """(thread, the user's text, month of 2026) each, answered "记下了。", the queue drained after each."""
    for thread, text, month in said:
        at = datetime(2026, month, 1, 9, tzinfo=timezone.utc).isoformat()
        mem.add(
            [{"role": "user", "content": text, "timestamp": at}, {"role": "assistant", "content": "记下了。", "timestamp": at}],
            user_id="u",
            thread_id=thread,
        )
        assert mem.flush().failed == 0


def test_a_change_said_in_another_thread_marks_the_old_threads_note_past(tmp_path):
    # a thread's notes are written by its own jobs only; the profile, written by every thread,
    # says at read time that 上海 ended in the later thread (the fact set's stale first-day notes)
    model = ScriptedModel([out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "已经搬到", "深圳"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary", "profile"], options={"model": model, "batch_messages": 2})
    said_in_threads(mem, ("t1", "我住在上海", 3), ("t2", "我已经搬到深圳了", 5))
    ctx = mem.context(user_id="u", thread_id="t1", strategy="summary", max_tokens=2000)
    line = next(x for x in ctx.messages[0].text.splitlines() if "上海" in x)
    assert "过去" in line and "2026-05-01" in line and "深圳" in line, line
    # stored as written: the old thread's record is not rewritten by the read
    items = mem.store.records.current(mem.scope("u", "t1"), "summary")[0].value["items"]
    assert not any(i.get("superseded_at") for i in items)
    # a value the profile still holds stays current
    mem2 = Memory(
        f"sqlite:///{tmp_path / 'n.db'}",
        layers=["summary", "profile"],
        options={"model": ScriptedModel([out(("用户", "人物", "住在", "上海"))]), "batch_messages": 2},
    )
    at = datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat()
    mem2.add(
        [{"role": "user", "content": "我住在上海", "timestamp": at}, {"role": "assistant", "content": "记下了。", "timestamp": at}],
        user_id="u",
        thread_id="t1",
    )
    assert mem2.flush().failed == 0
    text = mem2.context(user_id="u", thread_id="t1", strategy="summary", max_tokens=2000).messages[0].text
    assert "上海" in text and "过去" not in text


def test_a_note_that_names_the_user_by_name_is_settled_by_the_profile_too(tmp_path):
    # "我叫赵敏，住在成都" is noted as 赵敏|住在|成都: the user, by the name the profile knows
    model = ScriptedModel([out(("赵敏", "人物", "住在", "成都")), out(("用户", "人物", "搬到", "重庆"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary", "profile"], options={"model": model, "batch_messages": 2})
    said_in_threads(mem, ("t1", "我叫赵敏，住在成都", 3), ("t2", "我从成都搬到重庆了", 5))
    ctx = mem.context(user_id="u", thread_id="t1", strategy="summary", max_tokens=2000)
    line = next(x for x in ctx.messages[0].text.splitlines() if "成都" in x and "赵敏" in x)
    assert "过去" in line and "重庆" in line, line


def _items(mem):
    return mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"]


def test_a_value_said_as_ended_ends_the_note_that_said_it_and_replaces_nothing(tmp_path):
    # the first case: "不再做数据分析" is the old value, not a new job that ends 腾讯
    model = ScriptedModel(
        [
            out(("用户", "人物", "做", "数据分析师")),
            out(("用户", "人物", "换工作", "腾讯"), ("用户", "人物", "做", "数据分析")),
        ]
    )
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "我在招商银行做数据分析师。", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "我也换工作了，现在在腾讯做产品经理，不再做数据分析了。", datetime(2026, 5, 10, 9, tzinfo=timezone.utc).isoformat())
    state = {(i.get("object"), bool(i.get("superseded_at") or i.get("past"))) for i in _items(mem) if i.get("object")}
    assert state == {("数据分析师", True), ("腾讯", False), ("数据分析", True)}
    text = "\n".join(summary_lines(mem))
    assert "用户换工作腾讯" in text and "过去的情况：2026-05-10起已不成立" in text and "（已不再）" in text
    assert not any("腾讯" in line and "过去" in line for line in text.splitlines())


def test_an_english_value_said_as_ended_ends_its_note(tmp_path):
    model = ScriptedModel([out(("User", "person", "works as", "nurse")), out(("User", "person", "works as", "nurse"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "I work as a nurse at the city hospital.", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "I no longer work as a nurse.", datetime(2026, 6, 1, 9, tzinfo=timezone.utc).isoformat())
    items = [i for i in _items(mem) if i.get("object")]
    assert [(bool(i.get("superseded_at")), bool(i.get("past"))) for i in items] == [(True, False), (False, True)]


def test_a_cessation_ends_the_note_of_what_it_ends_whoever_it_belongs_to(tmp_path):
    # the new value is said under another predicate (缓存, not 使用), so only the cessation ends the old one
    model = ScriptedModel(
        [
            out(("支付网关", "服务", "使用", "Memcached"), ("用户", "人物", "去", "攀岩馆")),
            out(("支付网关", "服务", "缓存", "Redis")),
        ]
    )
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "我们的支付网关缓存用的是Memcached。我每周二去攀岩馆。", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat())
    say(mem, "支付网关的缓存从Memcached迁移到了Redis。", datetime(2026, 4, 1, 9, tzinfo=timezone.utc).isoformat())
    state = {i["object"]: i.get("superseded_at", "")[:10] for i in _items(mem) if i.get("object")}
    assert state == {"Memcached": "2026-04-01", "攀岩馆": "", "Redis": ""}  # the user's gym is no value of the gateway's
    assert "过去的情况：2026-04-01起已不成立" in "\n".join(summary_lines(mem))


def test_an_english_cessation_ends_the_users_note(tmp_path):
    model = ScriptedModel([out(("User", "person", "goes to", "climbing gym")), out()])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "I go to a climbing gym on Tuesdays.", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat(), "Noted.")
    say(mem, "I quit the climbing gym last week.", datetime(2026, 4, 1, 9, tzinfo=timezone.utc).isoformat(), "Noted.")
    (note,) = [i for i in _items(mem) if i.get("object")]
    assert note["superseded_at"].startswith("2026-04-01")
    assert "(past: no longer so since 2026-04-01)" in "\n".join(summary_lines(mem))


def test_a_job_change_said_without_the_new_job_ends_the_users_job_note(tmp_path):
    model = ScriptedModel([out(("User", "person", "works as", "nurse"), ("User", "person", "lives in", "Denver")), out()])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary"], options={"model": model, "batch_messages": 2})
    say(mem, "I work as a nurse and I live in Denver.", datetime(2026, 3, 1, 9, tzinfo=timezone.utc).isoformat(), "Noted.")
    say(mem, "I changed jobs last month, much calmer now.", datetime(2026, 6, 1, 9, tzinfo=timezone.utc).isoformat(), "Noted.")
    state = {i["object"]: i.get("superseded_at", "")[:10] for i in _items(mem) if i.get("object")}
    assert state == {"nurse": "2026-06-01", "Denver": ""}  # a job change is no move


def test_a_change_said_in_another_thread_ends_a_note_about_something_else_too(tmp_path):
    # 支付服务's own attributes, written by every thread, end the first thread's note about it
    model = ScriptedModel([out(("支付服务", "服务", "使用", "Memcached")), out(("支付服务", "服务", "缓存", "Redis"))])
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["summary", "profile"], options={"model": model, "batch_messages": 2})
    said_in_threads(mem, ("t1", "我们的支付服务缓存用的是Memcached", 3), ("t2", "支付服务的缓存从Memcached迁移到了Redis", 5))
    ctx = mem.context(user_id="u", thread_id="t1", strategy="summary", max_tokens=2000)
    line = next(x for x in ctx.messages[0].text.splitlines() if "Memcached" in x)
    assert "过去的情况：2026-05-01起已不成立" in line, line
