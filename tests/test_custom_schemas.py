"""The developer's own extraction schemas: the articles' EntityExtraction as the entity layer's
schema (``Memory(entity_schema=...)``) and a state schema as a pydantic model, through the real
extractor and store with a scripted model; ``Memory.extract`` for a one-off extraction with the
repair, retry and grounding of memstack's own (scripted, and once on the local model)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import List  # noqa: UP035  (the article writes List[Entity])

import pytest
from pydantic import BaseModel, Field

from memstack import Memory
from memstack.errors import InvalidInput, ModelOutputError
from memstack.testing import ScriptedModel

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))


# the articles' schema, as written there (entityExtraction.py)
class Entity(BaseModel):
    name: str = Field(description="实体名称")
    entity_type: str = Field(description="实体类型，例如人物、组织、项目、技术、产品")
    description: str = Field(description="根据历史对话提取的实体描述")
    attributes: dict = Field(default_factory=dict, description="实体相关属性")
    confidence: float = Field(default=1.0, description="实体提取置信度")


class EntityExtraction(BaseModel):
    entities: List[Entity] = Field(description="从历史对话中提取的实体列表")  # noqa: UP006  (as the article writes it)


# the article's conversation
TURNS = [
    {"role": "user", "content": "我正在开发一个知识中台"},
    {"role": "assistant", "content": "你使用什么技术开发？"},
    {"role": "user", "content": "后端使用SpringBoot"},
    {"role": "user", "content": "文档检索使用Elasticsearch"},
    {"role": "user", "content": "缓存使用Redis"},
]


def stamped(turns=TURNS):
    return [{**m, "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i, m in enumerate(turns)]


def entity(name, kind, description="", attributes=None, confidence=0.95):
    return {"name": name, "entity_type": kind, "description": description, "attributes": attributes or {}, "confidence": confidence}


ANSWER = {
    "entities": [
        entity("知识中台", "项目", "正在开发的知识中台", {"开发状态": "开发中", "团队规模": "50人"}),
        entity("SpringBoot", "技术", "后端使用SpringBoot", {"应用场景": "后端"}),
        entity("Kafka", "技术", "消息队列"),  # nobody said it
    ]
}


# ---- Memory(entity_schema=...) ------------------------------------------------------------------


def test_the_entity_layer_asks_for_the_developers_schema_and_keeps_what_was_said():
    model = ScriptedModel([json.dumps(ANSWER, ensure_ascii=False)])
    mem = Memory("memory://", layers=["entities"], options={"model": model, "batch_messages": 5}, entity_schema=EntityExtraction)
    mem.add(stamped(), user_id="u1", thread_id="s1")
    assert mem.flush().failed == 0
    (call,) = model.calls
    assert "实体类型，例如人物、组织、项目、技术、产品" in call["messages"][0]["content"]  # the schema, with its descriptions
    assert "缓存使用Redis" in call["messages"][1]["content"]
    records = {r.key: r.value for r in mem.memories("entity", user_id="u1")}
    assert {"springboot", "知识中台"} <= set(records) and "kafka" not in records  # Kafka was not said: not stored
    project = records["知识中台"]
    assert (project["name"], project["type"], project["description"]) == ("知识中台", "项目", "正在开发的知识中台")
    assert project["fields"] == {"confidence": 0.95}  # the schema's own fields, as the model gave them
    assert records["springboot"]["attributes"]["应用场景"]["value"] == "后端"
    assert project["attributes"]["开发状态"]["value"] == "开发中" and "团队规模" not in project["attributes"]  # nobody said 50人
    context = mem.context(query="我的项目用了什么技术？", user_id="u1", thread_id="s1", at=T0 + timedelta(hours=1))
    assert "SpringBoot" in context.messages[0].text and "Kafka" not in context.messages[0].text


def test_with_the_graph_the_statements_call_keeps_relations_and_the_schema_call_gives_entities():
    statements = {"memories": [{"subject": "用户", "subject_type": "人物", "predicate": "开发", "object": "知识中台"}]}
    model = ScriptedModel([json.dumps(statements, ensure_ascii=False), json.dumps(ANSWER, ensure_ascii=False)])
    mem = Memory("memory://", layers=["entities", "graph"], options={"model": model, "batch_messages": 5}, entity_schema=EntityExtraction)
    mem.add(stamped(), user_id="u1", thread_id="s1")
    assert mem.flush().failed == 0
    assert (
        "memories" in json.dumps(model.calls[0]["messages"], ensure_ascii=False)
        and "entity_type" in model.calls[1]["messages"][0]["content"]
    )
    assert [(r.value["source"], r.value["target"]) for r in mem.memories("relation", user_id="u1")] == [("用户", "知识中台")]
    assert {r.value["name"] for r in mem.memories("entity", user_id="u1")} >= {"知识中台", "SpringBoot"}


# the articles' knowledge-graph schema, as written there (C5)
class Relation(BaseModel):
    source: str = Field(description="关系起点实体")
    target: str = Field(description="关系终点实体")
    relation: str = Field(description="关系类型")
    evidence: str = Field(description="原始对话证据")
    confidence: float = Field(default=1.0)


class KnowledgeGraph(BaseModel):
    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)


GRAPH_TURNS = [
    {"role": "user", "content": "小李是一名程序员。莫尔索是小李的笔名。小李正在开发知识中台。知识中台后端使用SpringBoot。"},
    {"role": "assistant", "content": "好的，记住了。"},
]


def relation(source, kind, target, evidence="（模型写的证据）"):
    return {"source": source, "target": target, "relation": kind, "evidence": evidence, "confidence": 0.9}


GRAPH_ANSWER = {
    "entities": [
        entity("小李", "人物", "程序员"),
        entity("莫尔索", "人物", "小李的笔名"),
        entity("知识中台", "项目"),
        entity("SpringBoot", "技术"),
    ],
    "relations": [
        relation("莫尔索", "笔名", "小李"),
        relation("小李", "开发", "知识中台"),
        relation("知识中台", "后端使用", "SpringBoot"),
        relation("小李", "使用", "Kafka"),  # nobody said it
        relation("", "开发", "知识中台"),  # no source
    ],
}


def test_a_knowledge_graph_schema_gives_the_graph_its_relations_in_one_call():
    model = ScriptedModel([json.dumps(GRAPH_ANSWER, ensure_ascii=False)])
    mem = Memory("memory://", layers=["window", "graph"], options={"model": model, "batch_messages": 2}, entity_schema=KnowledgeGraph)
    mem.add(stamped(GRAPH_TURNS), user_id="u1", thread_id="s1")
    assert mem.flush().failed == 0
    (call,) = model.calls  # the schema's relations replace the statements call
    assert "关系" in call["messages"][0]["content"] and "关系起点实体" in call["messages"][0]["content"]
    relations = {(r.value["source"], r.value["relation"], r.value["target"]): r.value for r in mem.memories("relation", user_id="u1")}
    assert set(relations) == {("莫尔索", "笔名", "小李"), ("小李", "开发", "知识中台"), ("知识中台", "后端使用", "SpringBoot")}
    # the evidence is the turn's sentence naming both ends, not the model's quote
    assert relations[("知识中台", "后端使用", "SpringBoot")]["evidence"] == "知识中台后端使用SpringBoot。"
    ctx = mem.context(user_id="u1", thread_id="s2", query="莫尔索开发的项目用什么后端？", at=T0 + timedelta(hours=1))
    text = ctx.messages[0].text
    assert "SpringBoot" in text and "莫尔索" in text and "Kafka" not in text


def test_a_schemas_relations_are_found_by_their_fields_and_an_entity_schema_has_none():
    from memstack.llm.custom import relation_items, relations_of

    assert relation_items(EntityExtraction) is None and relations_of(EntityExtraction(entities=[])) == []
    assert relation_items(KnowledgeGraph) == "relations"
    assert [(r.source, r.relation, r.target) for r in relations_of(KnowledgeGraph.model_validate(GRAPH_ANSWER))][:1] == [
        ("莫尔索", "笔名", "小李")
    ]


class NoEntities(BaseModel):
    topic: str


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (dict, "entity_schema must be a pydantic model class (a subclass of pydantic.BaseModel), got the class dict"),
        (
            EntityExtraction(entities=[]),
            "entity_schema must be a pydantic model class (a subclass of pydantic.BaseModel), got an instance of EntityExtraction",
        ),
        ({"type": "object"}, "entity_schema must be a pydantic model class (a subclass of pydantic.BaseModel), got a dict"),
        (NoEntities, "entity_schema NoEntities has no entities: give it a list of models with a name field"),
    ],
)
def test_an_entity_schema_that_is_not_one_is_refused_when_the_memory_is_made(schema, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        Memory("memory://", layers=["entities"], entity_schema=schema)
    assert caught.value.field == "entity_schema"


def test_a_state_schema_may_be_a_pydantic_model():
    class Trip(BaseModel):
        出发地: str = Field(description="出发城市")
        预算: str = ""

    answer = {"state": [{"key": "出发地", "value": "北京"}, {"key": "机票类型", "value": "经济舱"}]}
    model = ScriptedModel([json.dumps(answer, ensure_ascii=False)], native_schema=True)
    mem = Memory("memory://", layers=["state"], options={"model": model, "batch_messages": 2}, state_schema=Trip)
    assert mem.profile.options["state_schema"]["properties"]["出发地"]["description"] == "出发城市"  # kept in the store
    mem.add(
        [{"role": "user", "content": "下周五从北京飞上海，经济舱"}, {"role": "assistant", "content": "好的。"}], user_id="u", thread_id="t"
    )
    assert mem.flush().failed == 0
    assert "出发地（出发城市）" in model.calls[0]["messages"][0]["content"]
    assert [r.key for r in mem.memories("state", user_id="u")] == ["出发地"]


# ---- Memory.extract ------------------------------------------------------------------------------


def test_extract_repairs_grounds_and_returns_the_developers_object():
    fenced = "```json\n" + json.dumps(ANSWER, ensure_ascii=False)[:-1] + ",}\n```"  # a fence and a trailing comma
    model = ScriptedModel([fenced, fenced])
    mem = Memory("memory://")
    result = mem.extract(TURNS, schema=EntityExtraction, model=model)
    assert isinstance(result, EntityExtraction)
    assert [e.name for e in result.entities] == ["知识中台", "SpringBoot"]  # Kafka: nobody said it
    assert result.entities[0].attributes == {"开发状态": "开发中", "团队规模": "50人"} and result.entities[0].confidence == 0.95  # as given
    assert [e.name for e in mem.extract(TURNS, schema=EntityExtraction, model=model, grounded=False).entities] == [
        "知识中台",
        "SpringBoot",
        "Kafka",
    ]
    system = model.calls[0]["messages"][0]["content"]
    assert "不要编造" in system and "实体提取置信度" in system  # the prompt in the turns' language, with the schema
    assert model.calls[0]["temperature"] == 0.0
    assert mem.threads(user_id="default") == []  # nothing stored


def test_extract_retries_with_the_error_shown_then_raises_with_the_raw_answer():
    wrong = json.dumps({"entities": [{"name": "Redis"}]})  # entity_type and description missing
    model = ScriptedModel([wrong, json.dumps({"entities": [entity("Redis", "技术", "缓存")]}, ensure_ascii=False)])
    assert [e.name for e in Memory("memory://").extract(TURNS, schema=EntityExtraction, model=model).entities] == ["Redis"]
    assert len(model.calls) == 2 and "entity_type" in model.calls[1]["messages"][-1]["content"]  # the correction names the field

    stubborn = ScriptedModel(["我不知道", "还是不知道"])
    with pytest.raises(ModelOutputError) as caught:
        Memory("memory://").extract(TURNS, schema=EntityExtraction, model=stubborn)
    assert caught.value.raw == "还是不知道" and "EntityExtraction" in str(caught.value) and "after 2 attempts" in str(caught.value)


class Summary(BaseModel):
    topic: str
    technologies: list[str]


def test_extract_takes_any_schema_strings_and_instructions():
    model = ScriptedModel(['{"topic": "knowledge platform", "technologies": ["SpringBoot"]}'])
    out = Memory("memory://").extract(
        ["I am building a knowledge platform on SpringBoot"], schema=Summary, model=model, instructions="Name the topic."
    )
    assert out == Summary(topic="knowledge platform", technologies=["SpringBoot"])
    assert model.calls[0]["messages"][0]["content"].startswith("Name the topic.")


@pytest.mark.parametrize(
    ("schema", "what"),
    [
        (dict, "got the class dict"),
        (Summary(topic="x", technologies=[]), "got an instance of Summary"),
        ('{"type": "object"}', "got a str"),
    ],
)
def test_extract_refuses_a_schema_that_is_not_a_pydantic_model(schema, what):
    model = ScriptedModel()
    with pytest.raises(InvalidInput, match=f"schema must be a pydantic model class \\(a subclass of pydantic.BaseModel\\), {what}"):
        Memory("memory://").extract(TURNS, schema=schema, model=model)
    assert model.calls == []


def test_extract_refuses_messages_without_text():
    with pytest.raises(InvalidInput, match="no user or assistant turn with text"):
        Memory("memory://").extract([{"role": "system", "content": "hi"}], schema=Summary, model=ScriptedModel())


class Named(BaseModel):
    name: str = Field(description="实体名称")
    entity_type: str = Field(description="实体类型，例如人物、组织、项目、技术、产品")


class Names(BaseModel):
    """The articles' EntityExtraction without the description and attributes: 97 output tokens
    instead of 155 for the four entities (measured), 22 s instead of 30-39 s on two shared cores."""

    entities: list[Named] = Field(description="从历史对话中提取的实体列表")


@pytest.mark.local_model
@pytest.mark.timeout(300)
def test_extract_on_the_local_model_finds_the_articles_four_entities():
    with Memory("memory://") as mem:
        result = mem.extract(TURNS, schema=Names, max_tokens=200)
    names = [e.name for e in result.entities]
    assert {"知识中台", "SpringBoot", "Elasticsearch", "Redis"} <= set(names), result
    assert all(e.entity_type.strip() for e in result.entities) and len(names) == len(set(names)) <= 6
