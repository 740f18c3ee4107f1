"""A store for the dashboard's tests: a Chinese conversation in two threads a week apart, the user's
entities with a superseded attribute, a graph of 60 relations (an alias among them), state,
summary notes, saved memories, model usage over several days, an audit trail, markup in messages,
names, state and saved memories (it must show as text), a user with saved memories only and one with
state only (no messages), and a second tenant with a user of the same id."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memstack import Memory
from memstack.saved import NOTES_THREAD, key_id, note_id
from memstack.types import Change, Scope, Unit, UsageRecord

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
KEYS = {"key-acme": "acme", "key-globex": "globex"}
USER = "li_si"
#: markup that must never run: a script, an attribute break-out with an onerror handler
XSS_SCRIPT = "<script>window.__xss = 1</script>"
XSS_IMG = '"><img src=x onerror="window.__xss = 1">'
#: a user only tenant acme has, and a secret only tenant globex's user of the same id has
ACME_ONLY = "wang_wu"
#: users without messages: one with saved memories only (the tools'), one with state only
NOTES_ONLY = "zhou_ba"
STATE_ONLY = "qian_jiu"
#: the seeded user's saved memories (a key/value one among them, and markup)
SAVED = ["我喜欢吃火锅", "饮食: 不吃香菜", f"备忘：{XSS_SCRIPT}"]
GLOBEX_SECRET = "globex-机密-项目"

CONVERSATION = [
    ("s1", 0, "user", "你好，我叫李四，住在上海，是一名后端工程师。"),
    ("s1", 1, "assistant", "你好李四！很高兴认识你。"),
    ("s1", 2, "user", "我正在开发一个知识中台，后端使用SpringBoot，搜索用Elasticsearch。"),
    ("s1", 3, "assistant", "好的，记住了：知识中台，SpringBoot 和 Elasticsearch。"),
    ("s1", 4, "user", f"顺便测试一下：{XSS_SCRIPT}"),
    ("s1", 5, "assistant", f"收到：{XSS_IMG}"),
    ("s2", 7 * 24 * 60, "user", "我上个月搬到深圳了，现在在星图科技工作。"),
    ("s2", 7 * 24 * 60 + 1, "assistant", "明白了，你现在住在深圳，在星图科技工作。"),
    ("s2", 7 * 24 * 60 + 2, "user", "知识中台的缓存改用Redis，预算是二十万。"),
    ("s2", 7 * 24 * 60 + 3, "assistant", "好的，缓存用Redis，预算二十万。"),
]

TECH = [
    "SpringBoot",
    "Elasticsearch",
    "Redis",
    "Kafka",
    "MySQL",
    "PostgreSQL",
    "Nginx",
    "Docker",
    "Kubernetes",
    "Prometheus",
    "Grafana",
    "Vue",
    "React",
    "TypeScript",
    "Go",
    "Python",
    "Java",
    "gRPC",
    "MinIO",
    "ClickHouse",
]
PEOPLE = ["张伟", "王芳", "刘洋", "陈静", "杨磊", "赵敏", "黄强", "周杰", "吴婷", "徐明"]


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _entity(name: str, kind: str, attributes: dict | None = None, aliases: list[str] | None = None) -> dict:
    return {"name": name, "type": kind, "aliases": aliases or [], "attributes": attributes or {}}


def _relation(source: str, relation: str, target: str, evidence: str, *, source_key: str | None = None, alias: bool = False) -> Change:
    src = source_key or source.casefold()
    key = f"{src}\x1f{relation}\x1f{target.casefold()}"
    value = {
        "source": source,
        "relation": relation,
        "target": target,
        "source_key": src,
        "target_key": target.casefold(),
        "evidence": evidence,
        "confidence": 0.9,
        "alias": alias,
    }
    return Change("put", "relation", key, value, ("m0",), _at(2))


def seed(memory: Memory) -> None:
    """Fill ``memory`` (any backend with records) with the dashboard's test data."""
    for thread, minutes, role, text in CONVERSATION:
        memory.add({"role": role, "content": text}, user_id=USER, thread_id=thread, tenant="acme", at=_at(minutes))
    memory.add({"role": "user", "content": "我是王五"}, user_id=ACME_ONLY, thread_id="w1", tenant="acme", at=_at(5))
    memory.add({"role": "user", "content": f"这是{GLOBEX_SECRET}"}, user_id=USER, thread_id="g1", tenant="globex", at=_at(5))
    records = memory.store.records
    user = memory.scope(USER, tenant="acme")
    lives = {
        "value": "深圳",
        "source_ids": [],
        "valid_from": _at(7 * 24 * 60).isoformat(),
        "values": [{"value": "深圳", "source_ids": [], "valid_from": _at(7 * 24 * 60).isoformat()}],
        "past": [{"value": "上海", "source_ids": [], "valid_from": _at(0).isoformat(), "until": _at(7 * 24 * 60).isoformat()}],
    }
    entities = [
        Change(
            "put",
            "entity",
            "user",
            _entity(
                "李四",
                "人物",
                {
                    "住在": {"value": "上海", "source_ids": [], "valid_from": _at(0).isoformat()},
                    "职业": {"value": "后端工程师", "source_ids": [], "valid_from": _at(0).isoformat()},
                },
            ),
            (),
            _at(0),
        ),
        Change(
            "put",
            "entity",
            "知识中台",
            _entity(
                "知识中台",
                "项目",
                {
                    "后端": {"value": "SpringBoot", "source_ids": [], "valid_from": _at(2).isoformat()},
                    "预算": {"value": "二十万", "source_ids": [], "valid_from": _at(7 * 24 * 60 + 2).isoformat()},
                },
                ["星图项目"],
            ),
            (),
            _at(2),
        ),
        Change("put", "entity", "星图科技", _entity("星图科技", "组织"), (), _at(7 * 24 * 60)),
        Change(
            "put",
            "entity",
            "xss",
            _entity(XSS_IMG, XSS_SCRIPT, {"备注": {"value": XSS_SCRIPT, "source_ids": [], "valid_from": _at(4).isoformat()}}),
            (),
            _at(4),
        ),
    ]
    records.apply(user, entities, layer="extract")
    # the move: the user's 住在 attribute superseded (the old value kept as past)
    me = records.current(user, "entity", ["user"])[0]
    records.apply(
        user,
        [Change("put", "entity", "user", {**me.value, "attributes": {**me.value["attributes"], "住在": lives}}, (), _at(0))],
        layer="extract",
    )
    relations = [
        _relation("李四", "开发", "知识中台", "我正在开发一个知识中台", source_key="user"),
        _relation("李四", "就职于", "星图科技", "现在在星图科技工作", source_key="user"),
    ]
    relations += [_relation("知识中台", "使用", t, f"知识中台使用{t}") for t in TECH]
    relations += [_relation(p, "参与", "知识中台", f"{p}参与了知识中台") for p in PEOPLE]
    relations += [_relation(p, "擅长", TECH[(i * 3) % len(TECH)], f"{p}擅长{TECH[(i * 3) % len(TECH)]}") for i, p in enumerate(PEOPLE)]
    relations += [_relation(TECH[i], "依赖", TECH[i + 1], f"{TECH[i]}依赖{TECH[i + 1]}") for i in range(0, 16, 2)]
    relations += [_relation("星图项目", "又名", "知识中台", "知识中台又名星图项目", alias=True)]
    relations += [
        _relation("李四", "住在", "上海", "我叫李四，住在上海", source_key="user"),
        _relation("李四", "住在", "深圳", "我上个月搬到深圳了", source_key="user"),
    ]
    relations += [_relation("李四", "认识", p, f"李四认识{p}", source_key="user") for p in PEOPLE[:7]]
    relations += [_relation(XSS_IMG, "注入", "知识中台", XSS_SCRIPT)]
    records.apply(user, relations, layer="extract")
    records.apply(
        user,
        [
            Change("put", "state", "城市", {"value": "深圳"}, (), _at(7 * 24 * 60)),
            Change("put", "state", "预算", {"value": 200000}, (), _at(7 * 24 * 60 + 2)),
            Change("put", "state", "xss", {"value": XSS_SCRIPT}, (), _at(4)),
        ],
        layer="state",
    )
    notes = {
        "items": [
            {"text": "用户叫李四，是后端工程师", "at": _at(0).isoformat(), "source_ids": []},
            {"text": "用户在开发知识中台，后端使用SpringBoot", "at": _at(2).isoformat(), "source_ids": []},
            {"text": f"用户发送了{XSS_IMG}", "at": _at(5).isoformat(), "source_ids": []},
        ]
    }
    records.apply(memory.scope(USER, "s1", tenant="acme"), [Change("put", "summary", "summary", notes, (), _at(5))], layer="extract")
    memory.store.usage.record(
        [
            UsageRecord(
                scope=memory.scope(USER, "s1", tenant="acme"),
                at=_at(d * 24 * 60 + 3),
                layer="extract",
                model="local",
                prompt_tokens=900 + 150 * d,
                completion_tokens=60 + 10 * d,
                latency_ms=1800.0,
            )
            for d in range(8)
        ]
    )
    memory.store.records.apply(
        memory.scope(USER, tenant="globex"), [Change("put", "state", "secret", {"value": GLOBEX_SECRET}, (), _at(5))], layer="state"
    )
    saved = [
        _saved(USER, note_id(SAVED[0]), SAVED[0], "饮食", 1),
        _saved(USER, key_id("饮食"), SAVED[1], None, 2),
        _saved(USER, note_id(SAVED[2]), SAVED[2], None, 3),
    ]
    memory.store.units.put([*saved, _saved(NOTES_ONLY, note_id("我养了一只猫"), "我养了一只猫", None, 4)])
    memory.store.records.apply(
        memory.scope(STATE_ONLY, tenant="acme"), [Change("put", "state", "语言", {"value": "中文"}, (), _at(6))], layer="tools"
    )


def _saved(user: str, uid: str, text: str, category: str | None, minutes: int) -> Unit:
    """A saved memory as the tools store it (a unit of kind "note" in the user's notes thread)."""
    return Unit(
        id=uid,
        scope=Scope(user_id=user, thread_id=NOTES_THREAD, tenant="acme"),
        text=text,
        timestamp=_at(minutes),
        kind="note",
        category=category,
    )


#: a user with a graph of hundreds of relations (tests/test_ui_browser.py: drawn and clickable)
BIG_GRAPH = "big_graph"


def seed_big_graph(memory: Memory, relations: int = 360, *, user: str = BIG_GRAPH) -> None:
    """``relations`` relations among ~0.7 of that many entities, a few of them hubs (deterministic)."""
    nodes, ends, seen, changes, i = max(2, relations * 7 // 10), [0], set(), [], 0
    while len(changes) < relations:
        a = i + 1 if i + 1 < nodes else (i * 7919) % nodes
        b = ends[(i * 2654435761) % len(ends)] if i % 3 else (i * 31) % nodes
        i += 1
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        ends += [a, b]
        changes.append(_relation(f"节点{a}", ("依赖", "使用", "参与", "认识")[i % 4], f"节点{b}", f"证据{len(changes)}：节点{a}与节点{b}"))
    memory.store.records.apply(memory.scope(user, tenant="acme"), changes, layer="extract")
