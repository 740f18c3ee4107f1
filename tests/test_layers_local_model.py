"""The articles' examples on the real local model (temperature 0, schema-constrained output).

Each test asserts what a correct extraction must contain, not exact strings. Marked ``local_model``;
skipped when the model's packages (``memstack[local]``) are not installed.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from chats import local_model, system, turns_from

from memstack import Memory

#: a hard cap: the four tests take about 70 s on one idle core
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(240)]

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
UNRELATED = [
    ("今天天气怎么样？", "今天晴，气温二十度左右。"),
    ("推荐一部电影吧。", "可以看看《肖申克的救赎》。"),
    ("番茄炒蛋怎么做？", "先炒蛋，再炒番茄，最后混合调味。"),
    ("周末去哪里玩比较好？", "可以去郊外爬山。"),
    ("怎么提高睡眠质量？", "睡前少看手机，保持规律作息。"),
    ("猫为什么喜欢晒太阳？", "晒太阳可以帮助它们保持体温。"),
    ("学英语有什么好方法？", "每天坚持听说读写。"),
    ("跑步前需要热身吗？", "需要，热身可以减少受伤。"),
    ("绿茶和红茶有什么区别？", "主要是发酵程度不同。"),
    ("怎么养多肉植物？", "少浇水，多晒太阳。"),
    ("北京有什么好吃的？", "烤鸭和炸酱面都很有名。"),
    ("怎样才能坚持健身？", "设定小目标，找朋友一起。"),
    ("咖啡喝多了会怎样？", "可能心慌失眠。"),
    ("如何挑选西瓜？", "敲一敲，声音清脆的比较好。"),
    ("下雨天适合做什么？", "在家看书或者听音乐。"),
    ("什么时候去海边最好？", "夏天和初秋都不错。"),
    ("怎么缓解眼睛疲劳？", "每隔一段时间看看远处。"),
    ("骑自行车要注意什么？", "戴头盔，遵守交通规则。"),
    ("怎么做一杯好喝的奶茶？", "红茶加牛奶，糖适量。"),
    ("练书法从哪里开始？", "先从楷书练起。"),
]


@pytest.fixture(scope="module")
def model():
    return local_model()


turns = turns_from(T0)


def test_entities_of_the_project_example(model):
    mem = Memory("memory://", layers=["entities"], options={"model": model})
    mem.add(turns(PROJECT), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    names = {r.value["name"].lower() for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert {"知识中台", "springboot", "elasticsearch", "redis"} <= names
    assert mem.store.usage.read(mem.scope("u"))[0].completion_tokens > 0


def test_graph_answers_a_multi_hop_question_through_the_pen_name(model):
    mem = Memory("memory://", layers=["graph"], options={"model": model})
    mem.add(
        turns(["小李是一名程序员。莫尔索是小李的笔名。小李正在开发知识中台。知识中台后端使用SpringBoot。", "好的，记住了。"]),
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0
    relations = mem.store.records.current(mem.scope("u"), "relation")
    ends = {(r.value["source"], r.value["target"]) for r in relations}
    assert {("小李", "知识中台"), ("知识中台", "SpringBoot")} <= ends
    assert any({r.value["source"], r.value["target"]} == {"小李", "莫尔索"} and r.value["alias"] for r in relations)
    assert all(r.value["evidence"] and r.source_ids for r in relations)
    ctx = mem.context(user_id="u", thread_id="t2", strategy="graph", query="莫尔索开发的项目用什么后端？", max_tokens=1000)
    facts = system(ctx)
    assert "莫尔索" in facts and "知识中台" in facts and "SpringBoot" in facts


def test_summary_keeps_name_and_profession(model):
    mem = Memory("memory://", layers=["summary"], options={"model": model})
    mem.add(
        turns(
            [
                "我叫李四，是一名软件工程师，目前在杭州工作。",
                "你好李四！很高兴认识你。",
                "我最近在学习Rust，打算用它重写一个日志服务。",
                "Rust很适合做这种高性能服务。",
            ]
        ),
        user_id="u",
        thread_id="t",
    )
    assert mem.flush().failed == 0
    notes = " ".join(i["text"] for i in mem.store.records.current(mem.scope("u", "t"), "summary")[0].value["items"])
    assert "李四" in notes and "软件工程师" in notes


def test_summary_buffer_answers_from_the_summary_after_twenty_unrelated_turns(model):
    mem = Memory("memory://", layers=["summary-buffer"], options={"model": model, "buffer_tokens": 200})
    unrelated = [t for pair in UNRELATED for t in pair]
    mem.add(turns(PROJECT + unrelated), user_id="u", thread_id="t")
    assert mem.flush().failed == 0
    ctx = mem.context(user_id="u", thread_id="t", strategy="summary-buffer", query="我的后端使用什么技术？", max_tokens=1500)
    shown = [m.text for m in ctx.messages if m.role != "system"]
    assert "后端使用SpringBoot" not in shown  # the turn itself is out of the buffer: the summary carries it
    assert "SpringBoot" in system(ctx)
    answer = model.complete(ctx.to_openai(), max_tokens=40).text
    assert "springboot" in answer.lower().replace(" ", "")
