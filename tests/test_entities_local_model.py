"""The user's own entity and knowledge updates on the real local model (issue 12, §2 and §4.3):
what the model writes for a self-introduction and for a move must still reach the user's entity,
with the new value current and the old one past. Marked ``local_model``; about a minute on one core."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from chats import local_model, system, turns_from

from memstack import Memory

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(300)]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def model():
    return local_model()


turns = turns_from(T0)


def test_a_self_introduction_and_first_person_questions_reach_the_users_entity(model):
    mem = Memory("memory://", layers=["entities", "graph"], options={"model": model})
    mem.add(turns(["我叫小李，是一名程序员，正在开发星图项目，后端使用SpringBoot。", "你好小李！"]), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    keys = {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "user" in keys and "小李" not in keys  # 小李 and 用户 are one entity
    profile = system(mem.context(user_id="u", thread_id="t2", strategy="profile", query="我是做什么的？", max_tokens=1000))
    assert "小李" in profile and "程序员" in profile
    # the graph's lines quote a few words around their object (issue 27), not the whole turn: the
    # user's relations are reached, and SpringBoot is there when a relation of it was stored (the
    # verification keeps "后端使用SpringBoot" for 星图项目, never as the user's own stack)
    stored = {r.value["target"] for r in mem.store.records.current(mem.scope("u"), "relation")}
    for question in ("我的后端使用什么技术？", "小李的后端使用什么技术？"):
        graph = system(mem.context(user_id="u", thread_id="t2", strategy="graph", query=question, max_tokens=1000))
        assert "星图项目" in graph and ("SpringBoot" in graph or "SpringBoot" not in stored), question


def test_a_move_makes_the_new_city_current_and_the_old_one_past(model):
    mem = Memory("memory://", layers=["entities", "graph"], options={"model": model})
    mem.add(turns(["我住在上海。", "好的。"]), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    mem.add(turns(["我已经从上海搬到深圳了。", "恭喜！"], T0 + timedelta(days=60)), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    ctx = mem.context(user_id="u", thread_id="t2", strategy="profile,graph", query="我现在住在哪里？", max_tokens=1000)
    text = system(ctx)
    assert "深圳" in text and "上海" in text
    profile, graph = text.split("相关的事实")[0], text.split("相关的事实")[-1]
    assert profile.index("深圳") < profile.index("此前：上海")  # current first, the old one as past
    assert "上海" not in graph or "已不成立" in graph
