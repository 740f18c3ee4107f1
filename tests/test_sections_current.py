"""What the model-made sections show is never stale, and they agree (issue 27, "What was seen" 4
and 5, §3): of two relations under one single-valued predicate the newer is current and the older
past with its dates, whatever order they were written in and whichever spelling of the predicate
they carry; the graph says what the entity section says; entities known by name only are still
rendered; every fact line carries the day it was said and a short quote of the words it came
from; and the model-made sections yield to the retrieval's raw turns when the budget is short.

The model's answers are scripted (exact statements through the real Extractor) on a real SQLite
store, in Chinese and English; the contexts asserted are what a chat model would read."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from chats import statements as out
from chats import system
from pydantic import BaseModel, Field

from memstack import Memory
from memstack.testing import ScriptedModel
from memstack.types import Change

D1 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
D2 = datetime(2026, 5, 10, 9, 0, tzinfo=timezone.utc)


def memory(tmp_path, layers, answers, batch=2, **kw):
    return Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=layers, options={"model": ScriptedModel(answers), "batch_messages": batch}, **kw)


def turns(*said, reply="好的"):
    """(text, time) pairs, each user turn followed by the assistant's ``reply`` a minute later."""
    out_ = []
    for text, when in said:
        out_ += [
            {"role": "user", "content": text, "timestamp": when.isoformat()},
            {"role": "assistant", "content": reply, "timestamp": (when + timedelta(minutes=1)).isoformat()},
        ]
    return out_


def add(mem, *batches):
    for batch in batches:
        mem.add(batch, user_id="u", thread_id="t")
        assert mem.run_jobs().failed == 0


def context(mem, strategy, query, max_tokens=1500):
    return system(mem.context(user_id="u", thread_id="t2", strategy=strategy, query=query, max_tokens=max_tokens))


def section(text, title):
    """The lines of the section whose title starts with ``title``."""
    block = next((b for b in text.split("\n\n") if b.startswith(title)), "")
    return block.splitlines()[1:]


def line_of(lines, *parts):
    return next((x for x in lines if all(p in x for p in parts)), None)


def current(line):
    """Whether a graph line states its relation as current (not past)."""
    return line is not None and "此前" not in line and "已不成立" not in line and "before" not in line and "no longer" not in line


# ---- item 4: the graph's supersession and the two sections agree ------------------------------


def test_a_move_under_another_spelling_of_the_predicate_supersedes_in_both_sections(tmp_path):
    # "移居" is "住在" (a spelling the rule did not know): 上海 and 深圳 were both current in the graph
    mem = memory(tmp_path, ["entities", "graph"], [out(("李四", "人物", "住在", "上海")), out(("李四", "人物", "移居", "深圳"))])
    add(mem, turns(("李四住在上海。", D1)), turns(("李四上个月移居深圳了。", D2)))
    text = context(mem, "entities,graph", "李四现在住在哪里？")
    graph = section(text, "相关的事实")
    assert current(line_of(graph, "李四", "深圳"))
    shanghai = line_of(graph, "李四", "上海")
    assert shanghai is not None and "此前：2026-03-01 至 2026-05-10" in shanghai
    entities = section(text, "已知的实体")
    assert "住在=深圳（自2026-05-10" in line_of(entities, "李四") and "此前：上海，2026-03-01起" in line_of(entities, "李四")


def test_an_older_statement_applied_later_does_not_make_the_old_city_current(tmp_path):
    # one batch holds both turns; the model listed the new city first, so the old one was applied
    # last and superseded the new one ("已不成立：2026-05-10 至 2026-03-01")
    mem = memory(tmp_path, ["entities", "graph"], [out(("李四", "人物", "搬到", "深圳"), ("李四", "人物", "住在", "上海"))], batch=4)
    add(mem, turns(("李四住在上海。", D1), ("李四上个月搬到深圳了。", D2)))
    text = context(mem, "entities,graph", "李四住在哪里？")
    graph = section(text, "相关的事实")
    assert current(line_of(graph, "李四", "深圳")) and not current(line_of(graph, "李四", "上海"))
    assert "2026-05-10 至 2026-03-01" not in text
    lisi = line_of(section(text, "已知的实体"), "李四")
    assert "住在=深圳" in lisi and "此前：上海" in lisi


def test_a_city_and_its_district_said_together_are_both_current(tmp_path):
    # "搬到杭州了，现在住在西湖区": 西湖区 replaced 杭州, and "我现在住在哪个城市？" got only the district
    mem = memory(
        tmp_path,
        ["entities", "graph"],
        [out(("李四", "人物", "住在", "成都")), out(("李四", "人物", "搬到", "杭州"), ("李四", "人物", "住在", "西湖区"))],
    )
    add(mem, turns(("李四住在成都。", D1)), turns(("李四从成都搬到杭州了，现在住在西湖区。", D2)))
    text = context(mem, "entities,graph", "李四现在住在哪个城市？")
    graph = section(text, "相关的事实")
    assert current(line_of(graph, "李四", "杭州")) and current(line_of(graph, "李四", "西湖区"))
    assert not current(line_of(graph, "李四", "→ 成都"))
    lisi = line_of(section(text, "已知的实体"), "李四")
    assert "住在=杭州（" in lisi and "、西湖区（" in lisi and "此前：成都" in lisi  # in the order said: the city first


def test_in_english_the_newer_city_is_current_in_both_sections(tmp_path):
    mem = memory(
        tmp_path,
        ["entities", "graph"],
        [out(("Li Si", "person", "lives in", "Shanghai")), out(("Li Si", "person", "recently moved to", "Shenzhen"))],
    )
    add(mem, turns(("Li Si lives in Shanghai.", D1)), turns(("Li Si recently moved to Shenzhen.", D2)))
    text = context(mem, "entities,graph", "Where does Li Si live now?")
    graph = section(text, "Related facts")
    assert current(line_of(graph, "Li Si", "Shenzhen"))
    shanghai = line_of(graph, "Li Si", "Shanghai")
    assert shanghai is not None and "before: 2026-03-01 to 2026-05-10" in shanghai
    lisi = line_of(section(text, "Known entities"), "Li Si")
    assert "Shenzhen (since 2026-05-10" in lisi and "before: Shanghai, from 2026-03-01" in lisi


def _stored(mem, lang="zh"):
    """Records as an older version (or another process) left them: the entity knows 李四 moved, the
    graph holds the old relation as current beside the new one."""
    zh = lang == "zh"
    src, old, new, pred, pred2 = (
        ("李四", "上海", "深圳", "住在", "现居") if zh else ("Li Si", "Shanghai", "Shenzhen", "lives in", "based in")
    )
    key = src.casefold()
    entity = {
        "name": src,
        "type": "人物" if zh else "person",
        "description": "",
        "aliases": [],
        "attributes": {
            pred: {
                "value": new,
                "source_ids": ["m2"],
                "valid_from": D2.isoformat(),
                "values": [{"value": new, "source_ids": ["m2"], "valid_from": D2.isoformat()}],
                "past": [{"value": old, "source_ids": ["m1"], "valid_from": D1.isoformat(), "until": D2.isoformat()}],
            }
        },
    }
    rel = [
        Change(
            "put",
            "relation",
            f"{key}\x1f{pred}\x1f{old.casefold()}",
            {
                "source": src,
                "relation": pred,
                "target": old,
                "source_key": key,
                "target_key": old.casefold(),
                "evidence": f"{src}住在{old}" if zh else f"{src} lives in {old}",
                "confidence": 0.9,
                "alias": False,
            },
            ("m1",),
            D1,
        ),
        Change(
            "put",
            "relation",
            f"{key}\x1f{pred2}\x1f{new.casefold()}",
            {
                "source": src,
                "relation": pred2,
                "target": new,
                "source_key": key,
                "target_key": new.casefold(),
                "evidence": f"{src}搬到{new}了" if zh else f"{src} is now based in {new}",
                "confidence": 0.9,
                "alias": False,
            },
            ("m2",),
            D2,
        ),
    ]
    mem.store.records.apply(mem.scope("u"), [Change("put", "entity", key, entity, ("m1", "m2"), D2), *rel], layer="test")


def test_the_graph_agrees_with_the_entity_section_on_what_is_stored(tmp_path):
    mem = memory(tmp_path, ["entities", "graph"], [])
    _stored(mem)
    text = context(mem, "entities,graph", "李四住在哪里？")
    graph = section(text, "相关的事实")
    assert current(line_of(graph, "深圳"))
    assert not current(line_of(graph, "上海")) and "此前：2026-03-01 至 2026-05-10" in line_of(graph, "上海")
    assert "住在=深圳（自2026-05-10" in line_of(section(text, "已知的实体"), "李四")


def test_the_graph_agrees_with_the_entity_section_in_english(tmp_path):
    mem = memory(tmp_path, ["entities", "graph"], [])
    _stored(mem, "en")
    text = context(mem, "entities,graph", "Where does Li Si live?")
    graph = section(text, "Related facts")
    assert current(line_of(graph, "Shenzhen")) and not current(line_of(graph, "Shanghai"))
    assert "before: 2026-03-01 to 2026-05-10" in line_of(graph, "Shanghai")


def test_a_relation_the_graph_holds_as_past_is_past_in_the_entity_section_too(tmp_path):
    # the attribute was written without the change (an older version's record), the relation with it
    mem = memory(tmp_path, ["entities", "graph"], [])
    entity = {
        "name": "王芳",
        "type": "人物",
        "description": "",
        "aliases": [],
        "attributes": {"工作单位": {"value": "华为", "source_ids": ["m1"], "valid_from": D1.isoformat()}},
    }
    relation = {
        "source": "王芳",
        "relation": "工作单位",
        "target": "华为",
        "source_key": "王芳",
        "target_key": "华为",
        "evidence": "王芳在华为工作",
        "confidence": 0.9,
        "alias": False,
        "invalid_at": D2.isoformat(),
    }
    mem.store.records.apply(
        mem.scope("u"),
        [
            Change("put", "entity", "王芳", entity, ("m1",), D1),
            Change("put", "relation", "王芳\x1f工作单位\x1f华为", relation, ("m1",), D1),
        ],
        layer="test",
    )
    text = context(mem, "entities,graph", "王芳在哪里工作？")
    assert "工作单位=（目前未知；此前：华为，2026-03-01起）" in line_of(section(text, "已知的实体"), "王芳")
    assert not current(line_of(section(text, "相关的事实"), "华为"))


# ---- item 5: entities known by name only ------------------------------------------------------


class Entity(BaseModel):
    name: str = Field(description="实体名称")
    entity_type: str = Field(description="实体类型，例如人物、组织、项目、技术、产品")
    description: str = Field(description="根据历史对话提取的实体描述")
    attributes: dict = Field(default_factory=dict, description="实体相关属性")
    confidence: float = Field(default=1.0, description="实体提取置信度")


class EntityExtraction(BaseModel):
    entities: list[Entity] = Field(description="从历史对话中提取的实体列表")


def named_only(*rows):
    return json.dumps(
        {"entities": [{"name": n, "entity_type": t, "description": "", "attributes": {}, "confidence": 1.0} for n, t in rows]},
        ensure_ascii=False,
    )


def test_entities_known_by_name_and_type_are_rendered_on_one_line(tmp_path):
    mem = memory(
        tmp_path, ["entities"], [named_only(("李明", "人物"), ("张三", "人物"), ("知识中台", "项目"))], entity_schema=EntityExtraction
    )
    add(mem, turns(("张三是我的同事，李明是他的组长，他们在做知识中台项目。", D1)))
    assert len(mem.store.records.current(mem.scope("u"), "entity")) == 3
    text = context(mem, "entities", "张三在做什么？")
    lines = section(text, "已知的实体")
    assert lines == ["- 还提到：张三（人物）、李明（人物）、知识中台（项目）"]  # the one the question names first


def test_entities_known_by_name_are_rendered_in_english(tmp_path):
    mem = memory(tmp_path, ["entities"], [named_only(("Alice", "person"), ("Atlas", "project"))], entity_schema=EntityExtraction)
    add(mem, turns(("Alice is my colleague and she works on the Atlas project.", D1)))
    lines = section(context(mem, "entities", "What is Atlas?"), "Known entities")
    assert lines == ["- Also mentioned: Atlas (project), Alice (person)"]


def test_a_name_said_on_an_entitys_line_is_not_listed_again(tmp_path):
    mem = memory(tmp_path, ["entities"], [out(("张三", "人物", "负责", "星图"))])
    add(mem, turns(("张三负责星图。", D1)))
    text = context(mem, "entities", "张三负责什么？")
    lines = section(text, "已知的实体")
    assert lines[0].startswith("- 张三（人物，说于2026-03-01）：负责=星图") and not any(
        "还提到" in x and "星图" in x for x in lines
    )  # 星图 is said on 张三's line


# ---- §3: dates, quotes, titles, and the budget ------------------------------------------------


def test_each_fact_line_carries_its_date_and_a_short_quote(tmp_path):
    long_turn = "我跟你说一下啊，张伟是我们部门新来的后端工程师，他从上个月开始负责星图项目的整个数据平台。"
    mem = memory(tmp_path, ["entities", "graph"], [out(("张伟", "人物", "负责", "星图项目"))])
    add(mem, turns((long_turn, D1)))
    text = context(mem, "entities,graph", "张伟负责什么？")
    assert text.startswith("已知的实体（日期是说起的日子，引号内是原话）")
    assert "相关的事实（知识图谱；日期是说起的日子，引号内是原话）" in text
    fact = line_of(section(text, "相关的事实"), "张伟", "星图项目")
    quote = re.search(r"“(.*?)”", fact).group(1)
    assert "上个月（2026年2月）" in quote  # a relative date in a quote carries its calendar date
    assert "2026-03-01" in fact and "星图项目" in quote and len(re.sub(r"（.*?）", "", quote).strip("…")) <= 20 and long_turn not in text
    person = line_of(section(text, "已知的实体"), "张伟")
    assert person.startswith("- 张伟（人物，说于2026-03-01）：负责=星图项目（“")


def test_each_fact_line_carries_its_date_and_a_short_quote_in_english(tmp_path):
    long_turn = "So let me tell you, Dana joined our team last month and she now leads the Atlas project for the whole data platform."
    mem = memory(tmp_path, ["entities", "graph"], [out(("Dana", "person", "leads", "the Atlas project"))])
    add(mem, turns((long_turn, D1)))
    text = context(mem, "entities,graph", "What does Dana lead?")
    assert text.startswith("Known entities (dates: when it was said; quotes: the words it came from)")
    assert "Related facts (knowledge graph; dates: when it was said; quotes: the words it came from)" in text
    fact = line_of(section(text, "Related facts"), "Dana", "Atlas")
    quote = re.search(r'"(.*?)"', fact).group(1)
    assert "last month (2026-02)" in quote  # a relative date in a quote carries its calendar date
    assert "2026-03-01" in fact and "Atlas" in quote and len(re.sub(r" \(.*?\)", "", quote).strip("…").split()) <= 12
    assert line_of(section(text, "Known entities"), "Dana").startswith('- Dana (person, said 2026-03-01): leads=the Atlas project ("')


def test_a_facts_quote_is_the_clause_that_names_its_value_not_the_sentence(tmp_path):
    # the rest of the sentence states other facts, which go stale on their own: beside the current
    # 计划=装修, the whole sentence said the old style (北欧风) again, and the model answered with it
    mem = memory(tmp_path, ["entities", "graph"], [out(("用户", "人物", "计划", "装修"))])
    add(mem, turns(("我家准备装修，预算二十万，想要北欧风。", D1)))
    text = context(mem, "entities,graph", "我想要什么装修风格？")
    assert "“我家准备装修…”" in text and "北欧风" not in text
    from memstack.layers.base import short_quote

    assert short_quote("如果明年能升职，我就买一辆车。", "车") == "如果明年能升职，我就买一辆车"  # its condition kept
    assert short_quote("I moved to Qingdao last month, and my wife stayed in Beijing.", "Qingdao") == "I moved to Qingdao last month…"
    assert short_quote("我叫王磊，住在上海，在招商银行做数据分析师。", "招商银行") == "…在招商银行做数据分析师"
    assert short_quote("我叫王磊，住在上海。", "深圳") == "我叫王磊，住在上海"  # no clause names it: what fits


def test_a_short_budget_drops_the_quotes_before_the_facts(tmp_path):
    from memstack.layers.base import ReadRequest
    from memstack.layers.graph import Graph
    from memstack.tokens import get_counter

    mem = memory(tmp_path, ["graph"], [out(("张伟", "人物", "负责", "星图项目"), ("星图项目", "项目", "使用", "Kafka"))])
    add(mem, turns(("张伟是我们部门的后端工程师，他负责星图项目。", D1), ("星图项目使用Kafka做消息队列。", D1 + timedelta(minutes=5))))
    counter = get_counter()

    def read(budget):
        request = ReadRequest(mem.scope("u"), "张伟负责的项目用什么？", D2, budget, counter)
        out_ = Graph(store=mem.store, share=1.0).read(request, [])
        return out_.sections[0].text.splitlines()[1:] if out_.sections else []

    roomy = read(None)
    assert len(roomy) == 2 and all("“" in x for x in roomy)
    bare = [re.sub(r"：“.*?”", "", x) for x in roomy]
    lines = read(counter.count("\n".join(["相关的事实（知识图谱；日期是说起的日子，引号内是原话）", roomy[0], bare[1]])))
    assert lines == [roomy[0], bare[1]]  # both facts, dated; the quote that did not fit left out
    assert "（2026-03-01）" in bare[1]


def test_model_made_sections_yield_to_the_retrieved_turns(tmp_path):
    # the shares add up to more than the memory room beside a long conversation: a section must go
    # or shrink, and it is the model-made one, never the raw turns that retrieval found
    # eight attributes (a digit in a predicate makes it a count, ``verify``: the names are letters)
    facts = [("用户", "人物", f"喜欢{'甲乙丙丁戊己庚辛'[i]}", f"运动{i}") for i in range(8)]
    options = {
        "model": ScriptedModel([out(*facts)], default=out()),
        "batch_messages": 2,
        "k": 4,
        "entities.share": 0.3,
        "retrieval.share": 0.3,
    }
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["window", "entities", "retrieval"], options=options)
    texts = (
        ["我喜欢" + "、".join(f"运动{i}" for i in range(8)) + "。"]
        + [f"第{i}个周末我去深圳湾跑步了，跑了{i + 5}公里。" for i in range(1, 6)]
        + [f"今天第{i}次聊天，说点别的事情，天气不错，心情也很好。" for i in range(8)]
    )
    add(mem, [m for i, t in enumerate(texts) for m in turns((t, D1 + timedelta(days=i)), reply="好的，我记住了，祝你开心。")])
    for budget in range(350, 650, 50):
        ctx = mem.context(user_id="u", thread_id="t", strategy="window,entities,retrieval", query="我周末去哪里跑步？", max_tokens=budget)
        assert ctx.sections.get("memory:retrieval") and "深圳湾" in system(ctx), budget


def test_a_question_gets_the_users_facts_it_needs_not_every_one(tmp_path):
    """The fact set's 我表姐的婚礼是哪一天？: "计划=聚会（…今年想在家里办个小聚会）", shown though the
    question does not name it, drew the small model to the sentence beside it (the birthday) and
    its date. For a question, the user's own facts are those it names, those that say who the
    user is, and, for a question about now or before, those that changed."""
    mem = memory(
        tmp_path,
        ["entities", "graph"],
        [
            out(("用户", "人物", "住在", "上海"), ("用户", "人物", "计划", "聚会")),
            out(("用户", "人物", "搬到", "深圳"), ("用户", "人物", "喜欢", "网球")),
        ],
    )
    add(mem, turns(("我住在上海，今年想在家里办个小聚会。", D1)), turns(("我已经从上海搬到深圳了，周末还是喜欢打网球。", D2)))
    wedding = context(mem, "entities,graph", "我表姐的婚礼是哪一天？")
    assert "计划" not in wedding and "网球" not in wedding  # (聚会 is in the quote of 上海's sentence)
    assert "深圳" in line_of(section(wedding, "已知的实体"), "用户")  # who the user is: where they live
    tennis = context(mem, "entities,graph", "我喜欢什么运动？")
    assert "喜欢=网球" in tennis and "计划" not in tennis
    now = context(mem, "entities,graph", "我现在的计划是什么？")
    assert "计划=聚会" in now  # named


def test_a_question_about_before_gets_only_the_facts_that_have_a_before(tmp_path):
    """The fact set's 我以前在哪家公司做前端？: the profile held 工作单位=美团 (the earlier 字节跳动 never
    stored as its value) and the small model answered 美团. Asked about before only, the profile
    shows what has a past value; the retrieved turns hold the rest."""
    mem = memory(
        tmp_path,
        ["entities"],
        [
            out(("用户", "人物", "住在", "上海"), ("用户", "人物", "做", "前端开发")),
            out(("用户", "人物", "搬到", "深圳"), ("用户", "人物", "工作单位", "美团")),
        ],
    )
    add(mem, turns(("我住在上海，在字节跳动做前端开发。", D1)), turns(("我已经从上海搬到深圳了。", D2), ("下周入职美团。", D2)))
    before = context(mem, "entities", "我以前在哪家公司做前端？")
    assert "美团" not in before and "前端开发" not in before, before
    assert "此前：上海" in line_of(section(before, "已知的实体"), "用户")  # what has a before
    now = context(mem, "entities", "我以前住在哪里，现在呢？")  # before and now: as for now
    assert "美团" in now and "深圳" in now


def test_a_relative_date_in_a_facts_quote_carries_its_calendar_date(tmp_path):
    mem = memory(tmp_path, ["entities", "graph"], [out(("用户", "人物", "去", "医院体检"))])
    add(mem, turns(("我上周五去医院体检了，结果一切正常。", datetime(2026, 3, 12, 9, tzinfo=timezone.utc))))
    text = context(mem, "entities,graph", "我是哪天去医院体检的？")
    assert "我上周五（2026-03-06）去医院体检了" in text


def test_a_question_about_a_day_gets_the_day_it_happened_not_the_day_it_was_said(tmp_path):
    # LifeAssist-CN: beside "去了=膝盖的核磁共振（说于2026-01-27）" the local model answered 01-27 for
    # a scan "上周六" (01-24); for a question about a day the lines carry no said-on date
    mem = memory(tmp_path, ["entities", "graph"], [out(("用户", "人物", "去", "医院体检"))])
    add(mem, turns(("我上周五去医院体检了，结果一切正常。", datetime(2026, 3, 12, 9, tzinfo=timezone.utc))))
    text = context(mem, "entities,graph", "我是哪天去医院体检的？")
    assert "2026-03-06" in text and "2026-03-12" not in text and "说于" not in text, text
    # any other question keeps the dates the facts were said
    assert "2026-03-12" in context(mem, "entities,graph", "我去医院体检的结果怎么样？")


def test_for_a_question_about_now_the_graph_shows_the_change_not_all_else_said_that_day(tmp_path):
    # a relation ended on a day brings its successor (the same relation) for a question about now;
    # the user's other relations of that day stay out: "用户 —四→ 老婆生日" and the like stood
    # before a question about a price, in place of the turns that held it
    mem = memory(
        tmp_path,
        ["graph"],
        [out(("用户", "人物", "住在", "上海")), out(("用户", "人物", "搬到", "深圳")), out(("用户", "人物", "养", "柯基"))],
    )
    add(mem, turns(("我住在上海。", D1)), turns(("我从上海搬到深圳了。", D2)), turns(("我还养了一只柯基。", D2)))
    graph = section(context(mem, "graph", "我现在的房租是多少？"), "相关的事实")
    assert current(line_of(graph, "深圳")) and line_of(graph, "上海") is not None
    assert line_of(graph, "柯基") is None
    asked = section(context(mem, "graph", "我现在养的是什么狗？"), "相关的事实")  # named: shown
    assert line_of(asked, "柯基") is not None
