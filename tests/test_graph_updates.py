"""The knowledge graph as a model reads it (issue 12, §2, §4.3, §4.5, §4.7): first-person questions
reach the user's relations, a superseded relation is kept as past and paths follow what is true now,
near-duplicate names are one node, and statements read as sentences, not glued words.

The model's answers are scripted (exact statements through the real Extractor) on a real SQLite store."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from chats import statements, system, turns_from

from memstack import Memory
from memstack.testing import ScriptedModel

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


out = statements


turns = turns_from(T0)


def memory(tmp_path, layers, answers, batch=2):
    return Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=layers, options={"model": ScriptedModel(answers), "batch_messages": batch})


def said(mem, *batches):
    for texts, start in batches:
        mem.add(turns(texts, start), user_id="u", thread_id="t")
        assert mem.run_jobs().failed == 0


def graph(mem, question):
    return system(mem.context(user_id="u", thread_id="t2", strategy="graph", query=question, max_tokens=1000))


PROJECT = (["我正在开发一个知识中台", "好的", "后端使用SpringBoot", "明白"], T0)
PROJECT_OUT = out(("用户", "人物", "正在开发", "一个知识中台"), ("知识中台", "项目", "后端使用", "SpringBoot"))


def test_a_first_person_question_reaches_the_users_relations(tmp_path):
    mem = memory(tmp_path, ["graph"], [PROJECT_OUT], batch=4)
    said(mem, PROJECT)
    assert "SpringBoot" in graph(mem, "用户的后端使用什么技术？")
    assert "SpringBoot" in graph(mem, "我的后端使用什么技术？")


def test_a_first_person_question_in_english_reaches_the_user(tmp_path):
    mem = memory(tmp_path, ["graph"], [out(("User", "person", "develops", "Atlas"), ("Atlas", "project", "uses", "Postgres"))], batch=4)
    said(mem, (["I develop Atlas", "ok", "Atlas uses Postgres", "fine"], T0))
    assert "Postgres" in graph(mem, "What database does my project use?")


def test_near_duplicate_names_are_one_node_and_the_two_hop_path_holds(tmp_path):
    mem = memory(tmp_path, ["graph"], [out(("张伟", "人物", "负责", "星图项目")), out(("星图", "项目", "使用", "Milvus"))])
    said(mem, (["张伟负责星图项目", "好的"], T0), (["星图使用Milvus做向量检索", "明白"], T0 + timedelta(days=1)))
    keys = {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "星图" not in keys and "星图项目" in keys
    assert "星图" in mem.store.records.current(mem.scope("u"), "entity", ["星图项目"])[0].value["aliases"]
    facts = graph(mem, "张伟负责的项目用什么做向量检索？")
    assert "张伟 —负责→ 星图项目" in facts and "星图 —使用→ Milvus" in facts
    assert "张伟" in graph(mem, "星图的负责人是谁？")


def test_a_quantifier_does_not_split_an_entity(tmp_path):
    mem = memory(tmp_path, ["entities", "graph"], [PROJECT_OUT], batch=4)
    said(mem, PROJECT)
    keys = {r.key for r in mem.store.records.current(mem.scope("u"), "entity")}
    assert "知识中台" in keys and "一个知识中台" not in keys
    assert {r.value["target_key"] for r in mem.store.records.current(mem.scope("u"), "relation")} == {"知识中台", "springboot"}
    assert "SpringBoot" in graph(mem, "我开发的项目后端用什么？")


def test_a_superseded_relation_is_kept_as_past_and_paths_follow_the_current_one(tmp_path):
    mem = memory(
        tmp_path,
        ["graph"],
        [
            out(("用户", "人物", "就职于", "蓝海科技"), ("蓝海科技", "组织", "位于", "杭州")),
            out(("用户", "人物", "跳槽到", "星河数据"), ("星河数据", "组织", "位于", "成都")),
        ],
        batch=4,
    )
    said(
        mem,
        (["我就职于蓝海科技", "好的", "蓝海科技位于杭州", "明白"], T0),
        (["我上个月跳槽到星河数据了", "恭喜", "星河数据位于成都", "好的"], T0 + timedelta(days=90)),
    )
    relations = {r.value["target"]: r for r in mem.store.records.current(mem.scope("u"), "relation")}
    assert relations["蓝海科技"].value["invalid_at"].startswith("2026-05-30") and "invalid_at" not in relations["星河数据"].value
    facts = graph(mem, "我的公司在哪个城市？")
    assert "用户 —跳槽到→ 星河数据" in facts and "成都" in facts
    assert "用户 —就职于→ 蓝海科技（此前：2026-03-01 至 2026-05-30，已不成立；“我就职于蓝海科技”）" in facts
    assert "杭州" not in facts  # the old employer is shown as past, and the path does not go on through it
    lines = facts.splitlines()
    assert lines.index(next(x for x in lines if "星河数据" in x)) < lines.index(next(x for x in lines if "蓝海科技" in x))


def test_a_value_said_as_the_old_one_is_past_from_the_start(tmp_path):
    mem = memory(tmp_path, ["graph"], [out(("用户", "人物", "住在", "上海"), ("用户", "人物", "搬到", "深圳"))])
    said(mem, (["我已经从上海搬到深圳了", "恭喜"], T0))
    relations = {r.value["target"]: r.value for r in mem.store.records.current(mem.scope("u"), "relation")}
    assert relations["上海"].get("invalid_at") and not relations["深圳"].get("invalid_at")
    assert "已不成立，截至2026-03-01" in graph(mem, "我住在哪里？")


def test_statements_read_as_sentences_in_the_summary(tmp_path):
    mem = memory(tmp_path, ["summary"], [out(("林晓", "人物", "老板", "陈刚"), ("陈刚", "人物", "希望", "积分兑换优惠券"))])
    said(mem, (["林晓的老板是陈刚，陈刚希望做积分兑换优惠券的功能", "好的"], T0))
    notes = system(mem.context(user_id="u", thread_id="t", strategy="summary", max_tokens=1000))
    assert "林晓的老板是陈刚" in notes and "陈刚希望积分兑换优惠券" in notes
    assert "林晓老板陈刚" not in notes


def test_english_near_duplicates_join_even_when_no_entity_is_made_of_them(tmp_path):
    mem = memory(
        tmp_path,
        ["graph"],
        [out(("Dana", "person", "leads", "the atlas project")), out(("atlas", "project", "stores vectors in", "pgvector"))],
    )
    said(mem, (["Dana leads the atlas project", "ok"], T0), (["atlas stores vectors in pgvector", "fine"], T0 + timedelta(days=1)))
    assert "pgvector" in graph(mem, "Where does the project Dana leads store vectors?")
