"""Plans that came true (``memstack.layers.fulfil``): the words that say a change is done, the plans
they complete, and what the profile, the graph and the summary show after them. The model is
scripted here; which statements the local model writes is ``bench facts``' to measure."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from chats import statements, turns_from

from memstack import Memory
from memstack.layers.attributes import attribute_values
from memstack.layers.entities import render_attribute
from memstack.layers.fulfil import DONE, completes, completions
from memstack.testing import ScriptedModel
from memstack.types import Message

T0 = datetime(2026, 6, 28, 9, 0, tzinfo=timezone.utc)
turns = turns_from(T0)


def user(text: str) -> Message:
    return Message(role="user", content=text, timestamp=T0)


@pytest.mark.parametrize(
    ("text", "kind", "whose"),
    [
        ("搬好啦！这边菜市场多，买菜方便多了。", "move", ""),
        ("搬完了，办公室大了一倍。", "move", ""),
        ("回沈阳了。三亚暖和是暖和，就是啥都贵。", "return", ""),
        ("开业一个多月了，生意还过得去。", "open", ""),
        ("已经调过来了，新单位挺好。", "transfer", ""),
        ("我妹妹搬好家了。", "move", "我妹妹"),
        ("we finally moved last weekend, the new place is great", "move", ""),
        ("I'm back in Leeds now", "return", ""),
        ("I started at Stripe last week", "start", ""),
        ("新学校上了两个礼拜课了，班主任终于不当了。", "new post", ""),
        ("my new job is way less stressful", "new post", ""),
        ("我们回来啦！海边晒黑了一圈。", "return", ""),
        ("旅游回来了，腿都走细了。", "return", ""),
        ("we got back from Porto on Sunday, still tired", "return", ""),
    ],
)
def test_the_words_that_say_a_change_is_done(text, kind, whose):
    done = completions([user(text)])
    assert (done[0].kind, done[0].whose) == (kind, whose)


@pytest.mark.parametrize(
    "text",
    [
        "终于弄好了",  # nothing names the change: left as it is
        "我在找新工作，面试了两家",
        "i'm looking for a new job",
        "铺子盘下来了，下个月初开业。",  # still to come
        "还没搬完呢",
        "我们下个月搬家",
        "你回来了吗？",
        "回复了",
        "我也回了他消息",
        "要是明年调过去就好了",
        "haven't moved yet",
        "we moved the meeting to friday",
        "I started at 9 today",
        "if we moved, the rent would double",
        "we're thinking about moving",
    ],
)
def test_what_is_not_yet_done_or_not_said_completes_nothing(text):
    assert completions([user(text)]) == []


def test_a_completion_completes_only_a_plan_of_its_kind():
    (moved,) = completions([user("搬好啦！")])
    assert completes(moved, "计划", "下个月从岳麓区搬到雨花区", "我们家下个月从岳麓区搬到雨花区，离女儿学校近点。")
    assert not completes(moved, "计划", "开肠粉店", "想在顺德开个肠粉店")  # another kind of plan
    assert not completes(moved, "住在", "岳麓区", "我住在岳麓区")  # no plan
    (back,) = completions([user("回沈阳了。")])
    assert completes(back, "打算住到", "开春再回沈阳", "打算住到开春再回沈阳。")
    assert not completes(back, "打算", "回老家过年", "过年打算回老家")  # another place
    (post,) = completions([user("新学校上了两个礼拜课了")])
    assert completes(post, "计划", "滨江区的一所高中", "下学期我要调到滨江区的一所高中去了")
    assert not completes(post, "计划", "搬到雨花区", "下个月搬到雨花区")
    # coming back, with no place named, completes a trip, not a move or a return elsewhere
    (home,) = completions([user("我们回来啦！海边晒黑了一圈。")])
    assert completes(home, "计划", "去三亚玩一周", "我们打算国庆去三亚玩一周。")
    assert not completes(home, "计划", "搬到雨花区", "下个月搬到雨花区")
    (porto,) = completions([user("we got back from Porto on Sunday")])
    assert completes(porto, "plans", "a trip to Porto", "We're planning a trip to Porto in May.")


def memory(tmp_path, layers, answers):
    return Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=layers, options={"model": ScriptedModel(answers), "batch_messages": 2})


def said(mem, *batches):
    for texts, start in batches:
        mem.add(turns(texts, start), user_id="u", thread_id="t")
        assert mem.run_jobs().failed == 0


def test_a_plan_carried_out_is_done_in_the_profile_and_the_graph_and_shown_as_done(tmp_path):
    mem = memory(tmp_path, ["profile", "graph"], [statements(("用户", "人物", "计划", "搬到雨花区")), statements()])
    said(
        mem,
        (["还有件事，我们家下个月从岳麓区搬到雨花区，离女儿学校近点。", "好的"], T0),
        (["搬好啦！雨花区这边菜市场多，买菜比以前方便多了。", "恭喜"], T0 + timedelta(days=67)),
    )
    attributes = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    now, before = attribute_values(attributes["计划"])
    assert now == [] and [p["value"] for p in before] == ["搬到雨花区"] and before[0][DONE]
    assert render_attribute("计划", attributes["计划"], "zh") == "计划=（已实现：搬到雨花区，2026-09-03实现）"
    (relation,) = mem.store.records.current(mem.scope("u"), "relation")
    assert relation.value[DONE] and relation.value["invalid_at"].startswith("2026-09-03")
    ctx = mem.context(user_id="u", thread_id="ask", query="我搬到雨花区了吗？", at=T0 + timedelta(days=70))
    shown = "\n".join(m.text for m in ctx.messages)
    assert "已实现" in shown and "已不成立" not in shown


def test_a_plan_called_off_is_not_done(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "计划", "搬到雨花区")), statements()])
    said(
        mem,
        (["我们家下个月从岳麓区搬到雨花区。", "好的"], T0),
        (["雨花区不搬了，房东不续租的事解决了。", "那挺好"], T0 + timedelta(days=20)),
    )
    attributes = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    _now, before = attribute_values(attributes["计划"])
    assert all(not p.get(DONE) for p in before)


def test_a_move_said_ahead_is_a_plan_the_rule_adds_when_the_model_gave_it_another_subject(tmp_path):
    # the local model wrote "长沙岳麓区|计划|雨花区" (dropped: it names no subject the words say);
    # the move rule adds the user's move, said ahead of time, as a plan; "搬好啦" then marks it done
    mem = memory(tmp_path, ["profile"], [statements(("长沙岳麓区", "地点", "计划", "雨花区")), statements()])
    said(
        mem,
        (["跟你说个事，我们家下个月搬到雨花区，离孩子学校近点。", "好的"], T0),
        (["搬好啦！雨花区这边菜市场多。", "恭喜"], T0 + timedelta(days=40)),
    )
    attributes = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    now, before = attribute_values(attributes["计划搬到"])
    assert now == [] and [p["value"] for p in before] == ["雨花区"] and before[0][DONE]
    (lives,) = attribute_values(attributes["住在"])[0]  # from the day it happened, never before
    assert lives["value"] == "雨花区" and lives["valid_from"].startswith("2026-08-07") and "搬到" not in attributes


def test_a_planned_move_that_came_true_is_where_the_user_lives_from_then(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "住在", "长沙岳麓区")), statements(), statements()])
    said(
        mem,
        (["我叫周敏，住在长沙岳麓区。", "你好"], T0),
        (["我们家下个月搬到雨花区，离孩子学校近点。", "好的"], T0 + timedelta(days=30)),
        (["搬好啦！雨花区这边菜市场多。", "恭喜"], T0 + timedelta(days=75)),
    )
    attributes = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    now, before = attribute_values(attributes["住在"])
    assert [c["value"] for c in now] == ["雨花区"] and now[0]["valid_from"].startswith("2026-09-11")
    assert [p["value"] for p in before] == ["长沙岳麓区"]
