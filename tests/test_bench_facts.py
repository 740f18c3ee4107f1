"""`memstack bench facts` (issue 27 §1): the development set and its loader, the scorer's verdicts
on stored items, reading back what the store holds, the run with a scripted model, and the command.
One test runs two short conversations on the real local model (marked ``local_model``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
from openai_stub import CannedOpenAI

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.evaluation.datasets import load
from memstack.evaluation.facts import (
    CATEGORIES,
    DEFAULT_DATA,
    STATUSES,
    FactConversation,
    Gold,
    Item,
    Turn,
    format_report,
    item_status,
    load_facts,
    rescore,
    run,
    score_item,
    stored_items,
    tally,
)
from memstack.evaluation.qa import systems_for
from memstack.retrieval.units import language
from memstack.testing import ScriptedModel
from memstack.types import Change

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


# ---- the development set -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["facts_fresh", *(f"facts_fresh{n}" for n in range(2, 10))])
def test_the_fresh_sets_load_with_their_questions(name):
    convs = load_facts(DEFAULT_DATA.parent / name)  # every field of every line checked
    assert len(convs) >= 6 and all(c.gold and c.questions for c in convs)
    assert {c.lang for c in convs} == {"zh", "en"}


def test_the_bundled_set_has_its_counts_and_covers_every_category_in_both_languages():
    convs = load_facts(DEFAULT_DATA)  # the loader checks every field of every line
    langs = Counter(c.lang for c in convs)
    assert len(convs) >= 32 and langs["zh"] >= 2 * len(convs) // 3 - 1 and langs["en"] >= len(convs) // 4
    gold = [(c.lang, g) for c in convs for g in c.gold]
    assert len(gold) >= 160
    assert sum(1 for _, g in gold if g.status != "not_a_fact") >= 160  # traps on top of the facts
    for lang in ("zh", "en"):
        assert {g.category for lg, g in gold if lg == lang} == set(CATEGORIES), lang
        assert {g.status for lg, g in gold if lg == lang} == set(STATUSES), lang
    for c in convs:
        assert 2 <= len(c.turns) <= 6 and c.gold
        assert any(g.status == "not_a_fact" for g in c.gold) or c.id == "zh-21-mao", c.id  # a trap in (nearly) every one
        assert all(g.whose in ("user", "other") for g in c.gold)
    said = {c.id: " ".join(t.user for t in c.turns) for c in convs}
    # issue 27's "What was seen" is in the set
    assert "我上个月从上海搬到深圳了。" in said["zh-01-wanglei"] and "不再做数据分析了" in said["zh-01-wanglei"]
    assert "星图项目使用Kafka和PostgreSQL。" in said["zh-02-xingtu"] and "天枢用的是Flink" in said["zh-02-xingtu"]
    assert "缓存改用Memcached了。" in said["zh-04-zhishi"] and "莫尔索是小李的笔名" in said["zh-05-moersuo"]
    lisi = {(g.object, g.status) for c in convs if c.id == "zh-03-lisi" for g in c.gold}
    assert {("上海", "past"), ("深圳", "current")} <= lisi


def _write(tmp_path, lines):
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


GOOD = {
    "id": "t1",
    "lang": "zh",
    "turns": [
        {"at": "2026-03-01T10:00:00+08:00", "user": "我住在上海。", "assistant": "好的，你可以试试用Tableau。"},
        {"at": "2026-05-10T20:00:00+08:00", "user": "我上个月从上海搬到深圳了。", "assistant": "搬家辛苦了！"},
    ],
    "gold": [
        {"subject": "用户", "predicate": "住在", "object": "上海", "status": "past", "whose": "user", "category": "change"},
        {
            "subject": "用户",
            "predicate": "住在",
            "object": "深圳",
            "status": "current",
            "whose": "user",
            "category": "change",
            "aliases": ["深圳市"],
        },
        {"subject": "用户", "predicate": "使用", "object": "Tableau", "status": "not_a_fact", "whose": "user", "category": "not_a_fact"},
    ],
}


QUESTION = {
    "question": "我现在住在哪个城市？",
    "translation": "Which city do I live in now?",
    "type": "knowledge-update",
    "keywords": ["深圳|shenzhen"],
    "answer": "深圳",
    "evidence": [1],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lang": "fr"}, "lang"),
        ({"turns": GOOD["turns"][:1]}, "2 to 6"),
        ({"turns": [GOOD["turns"][1], GOOD["turns"][0]]}, "not later"),
        ({"turns": [{**GOOD["turns"][0], "at": "2026-03-01T10:00:00"}, GOOD["turns"][1]]}, "UTC offset"),
        ({"gold": [{**GOOD["gold"][0], "status": "maybe"}]}, "status"),
        ({"gold": [{**GOOD["gold"][0], "category": "misc"}]}, "category"),
        ({"gold": [{**GOOD["gold"][0], "whose": "other"}]}, "whose=user"),
        ({"gold": [{**GOOD["gold"][0], "object": "北京"}]}, "not said|is said"),
        ({"gold": [{**GOOD["gold"][0], "status": "not_a_fact"}]}, "not_a_fact"),
        ({"gold": [GOOD["gold"][0], GOOD["gold"][0]]}, "twice"),
        ({"gold": [{**GOOD["gold"][0], "colour": "red"}]}, "unknown fields"),
        ({"questions": [{**QUESTION, "type": "trivia"}]}, "type must be"),
        ({"questions": [{**QUESTION, "evidence": [2]}]}, "evidence"),
        ({"questions": [{**QUESTION, "evidence": []}]}, "evidence"),
        ({"questions": [{**QUESTION, "keywords": ["深圳|"]}]}, "alternatives"),
        ({"questions": [{**QUESTION, "translation": ""}]}, "translation"),
        ({"questions": [{**QUESTION, "hint": "x"}]}, "unknown fields"),
    ],
)
def test_the_loader_refuses_a_bad_line_naming_file_and_line(tmp_path, change, message):
    path = _write(tmp_path, [GOOD, {**GOOD, "id": "t2", **change}])
    with pytest.raises(InvalidInput, match=f"set.jsonl:2: .*({message})"):
        load_facts(path)


def test_the_loader_reads_a_directory_and_refuses_a_missing_one(tmp_path):
    _write(tmp_path, [GOOD])
    (conv,) = load_facts(tmp_path)
    assert [s for s, _ in conv.sessions()] == ["d1-2026-03-01", "d2-2026-05-10"]
    with pytest.raises(InvalidInput, match="no fact conversations"):
        load_facts(tmp_path / "nowhere")
    with pytest.raises(InvalidInput, match="given twice"):
        load_facts(_write(tmp_path, [GOOD, GOOD]))


def test_the_questions_become_a_bench_data_set_asked_a_day_later_in_either_language(tmp_path):
    path = _write(tmp_path, [{**GOOD, "questions": [QUESTION]}])
    (conv,) = load("facts", path)
    assert [s.id for s in conv.sessions] == ["d1-2026-03-01", "d2-2026-05-10"]
    assert [(t.key, t.role) for s in conv.sessions for t in s.turns] == [
        ("t0", "user"),
        ("t0", "assistant"),
        ("t1", "user"),
        ("t1", "assistant"),
    ]
    (q,) = conv.questions
    assert (q.text, q.category, q.evidence, q.keywords) == (
        "我现在住在哪个城市？",
        "knowledge-update",
        frozenset({"t1"}),
        ("深圳|shenzhen",),
    )
    assert q.at == datetime(2026, 5, 11, 20, 0, tzinfo=timezone(timedelta(hours=8)))
    (other,) = load("facts", path, translated=True)
    assert other.questions[0].text == "Which city do I live in now?" and other.questions[0].translation == "我现在住在哪个城市？"
    with pytest.raises(InvalidInput, match="no question of facts has a translation"):
        load("facts", _write(tmp_path, [GOOD]), translated=True)


def test_the_bundled_questions_cover_the_kinds_that_wrong_memories_break_in_both_languages():
    convs = load_facts(DEFAULT_DATA)
    questions = [(c.lang, q) for c in convs for q in c.questions]
    assert all(c.questions for c in convs) and len(questions) >= 70
    for lang in ("zh", "en"):
        kinds = Counter(q.type for lg, q in questions if lg == lang)
        assert {"knowledge-update", "negation", "other-person", "plan", "single-hop", "temporal"} <= set(kinds), (lang, kinds)
    # every question's translation is in the other language, and a keyword's alternatives cover both
    for lang, q in questions:
        assert (language(q.text), language(q.translation)) == (lang, "en" if lang == "zh" else "zh"), q.text


# ---- the scorer ----------------------------------------------------------------------------------


def G(subject, predicate, obj, status, category="plain", aliases=(), subject_aliases=()):
    return Gold(subject, predicate, obj, status, "user" if subject == "用户" else "other", category, tuple(aliases), tuple(subject_aliases))


CONV = FactConversation(
    "c",
    "zh",
    (Turn(T0, "我叫王磊，住在上海。张伟负责星图项目，星图使用Kafka。", "你可以试试用Tableau。"),),
    (
        G("用户", "叫", "王磊", "current"),
        G("用户", "住在", "上海", "past", "change", ["上海市"]),
        G("用户", "住在", "深圳", "current", "change", ["深圳市"]),
        G("用户", "职业", "数据分析师", "past", "negation", ["数据分析"]),
        G("用户", "读研", "日本", "plan", "plan", ["日本读研"]),
        G("张伟", "负责", "星图", "current", "other_person", ["星图项目"]),
        G("星图", "使用", "Kafka", "current", "other_person", subject_aliases=["星图项目"]),
        G("用户", "使用", "Tableau", "not_a_fact", "not_a_fact"),
        G("小李", "笔名", "莫尔索", "current", "other_person"),
        G("用户", "室友", "小李", "current", "other_person"),
        G("妹妹", "专业", "临床医学", "current", "other_person", subject_aliases=["我妹妹", "林小雨"]),
    ),
    user_names=("王磊",),
)


def verdict(subject, predicate, obj, status="current", source="profile", key=""):
    return score_item(Item(subject, predicate, obj, status, source, key), CONV).verdict


def test_a_right_value_is_correct_whatever_the_wording():
    assert verdict("用户", "住在", "深圳", key="user") == "correct"
    assert verdict("王磊", "搬到", "深圳市", source="relation") == "correct"  # a name the user gave, another spelling
    assert verdict("用户", "住在", "上海", "past", key="user") == "correct"  # the old value, kept as past
    assert verdict("用户", "不再做", "数据分析", key="user") == "correct"  # "不再" says it is over
    assert verdict("用户", "打算去", "日本读研", key="user") == "correct"  # a plan stored as a plan
    assert verdict("星图项目", "使用", "Kafka", source="entity") == "correct"
    assert verdict("用户", "alias", "王磊", source="alias", key="user") == "correct"
    assert verdict("星图项目", "负责人", "张伟", source="relation") == "correct"  # a relation the other way round
    assert verdict("用户", "妹妹的专业", "临床医学", key="user") == "correct"  # the predicate names whose it is
    assert verdict("林小雨", "专业", "临床医学", source="entity") == "correct"
    assert verdict("用户", "专业", "临床医学", key="user") == "misattributed"  # the sister's, not the user's


def test_a_stale_or_inverted_value_shown_as_current_is_a_wrong_current_value():
    assert verdict("用户", "住在", "上海", key="user") == "wrong_current"
    assert verdict("用户", "职业", "数据分析师", key="user") == "wrong_current"  # 不再 lost
    assert verdict("用户", "去", "日本", key="user") == "wrong_current"  # a plan shown as done
    assert verdict("用户", "住在", "深圳", "past", key="user") == "wrong_status"  # the new one marked past: wrong, not current


def test_the_assistants_suggestion_stored_as_a_fact_is_wrong_under_any_subject():
    assert verdict("用户", "使用", "Tableau", key="user") == "wrong_current"
    assert verdict("星图", "使用", "Tableau", source="entity") == "wrong_current"
    assert verdict("用户", "使用", "Tableau", "past", key="user") == "wrong_status"


def test_another_subjects_value_and_a_wrong_alias_are_misattributed_and_the_rest_unmatched():
    assert verdict("用户", "使用", "Kafka", key="user") == "misattributed"  # issue 27: "用户 使用 Kafka"
    assert verdict("用户", "alias", "小李", source="alias", key="user") == "misattributed"  # the user is not 小李
    assert verdict("用户", "喜欢", "滑雪", key="user") == "unmatched"
    assert verdict("用户", "住在", "深", key="user") == "unmatched"  # a fragment is no value


def test_a_correct_item_that_carries_several_gold_values_finds_them_all_for_recall():
    conv = FactConversation(
        "c",
        "en",
        CONV.turns,
        (
            G("用户", "trip to", "Portugal", "plan", "plan"),
            G("用户", "trip date", "September", "plan", "date"),
            G("用户", "visit", "Lisbon", "not_a_fact", "not_a_fact"),
        ),
    )
    v = score_item(Item("user", "plans", "trip to Portugal in September", "current", "profile", "user"), conv)
    assert v.verdict == "correct" and len({v.gold, *v.also}) == 2
    assert tally([conv], {"c": [v]})["overall"]["found"] == 2


def test_an_old_value_stored_beside_a_right_one_or_inside_an_attributes_name_is_a_wrong_current_value():
    conv = FactConversation(
        "c",
        "zh",
        CONV.turns,
        (
            G("用户", "住在", "上海", "past", "change"),
            G("用户", "住在", "深圳", "current", "change"),
            G("用户", "喜欢", "打网球", "current"),
            G("用户", "使用", "Spark", "current", "multi_value"),
            G("用户", "使用", "Hive", "past", "change"),
            G("用户", "考试日期", "7月5日", "current", "date"),
            G("用户", "quit smoking in", "February", "current", "date"),
        ),
    )

    def v(predicate, obj):
        return score_item(Item("用户", predicate, obj, "current", "profile", "user"), conv)

    assert v("住在上海", "喜欢打网球").verdict == "wrong_current"  # the attribute's name holds 上海, now past
    assert v("日常用", "Spark和Hive").verdict == "wrong_current"  # Hive is no longer used
    assert v("搬家", "从上海搬到深圳").verdict == "correct"  # its own words say which one is old
    assert v("喜欢", "打网球").verdict == "correct"
    assert v("计划", "7月5日").verdict == "correct"  # a date of something coming, read as a plan
    assert v("quit smoking", "February").verdict == "correct"  # the gold's predicate says "quit" too


def test_a_stored_value_reads_as_negated_planned_or_past_from_its_own_words():
    assert item_status("current", "不再做", "数据分析") == "negated"
    assert item_status("current", "饮食", "不吃香菜") == "negated"
    assert item_status("current", "quit", "smoking") == "negated"
    assert item_status("current", "doesn't eat", "meat") == "negated"  # "doesn t" once punctuation is a space
    assert item_status("current", "打算", "去日本读研") == "plan"
    assert item_status("current", "is thinking about", "a dog") == "plan"
    assert item_status("current", "计划", "辞职去深圳") == "plan"  # a plan to end something is a plan
    assert item_status("current", "不打算", "辞职") == "negated"
    assert item_status("current", "以前住在", "上海") == "past"
    assert item_status("past", "住在", "上海") == "past"
    assert item_status("current", "住在", "深圳") == "current"
    assert item_status("current", "职业", "前端开发") == "current"  # 前 is no past marker


def test_the_tally_counts_precision_recall_and_wrong_current_values_per_category():
    items = [
        Item("用户", "住在", "深圳", "current", "profile", "user"),  # correct
        Item("用户", "住在", "上海", "current", "profile", "user"),  # wrong current
        Item("用户", "使用", "Tableau", "current", "profile", "user"),  # a trap: wrong current
        Item("用户", "喜欢", "滑雪", "current", "profile", "user"),  # unmatched
        Item("星图项目", "使用", "Kafka", "current", "relation", "星图项目"),  # correct
        Item("用户", "住在", "深圳", "current", "note"),  # a note: apart
    ]
    verdicts = {"c": [score_item(i, CONV) for i in items]}
    t = tally([CONV], verdicts)
    overall = t["overall"]
    assert (overall["stored"], overall["correct"], overall["wrong_current"], overall["unmatched"]) == (5, 2, 2, 1)
    assert overall["precision"] == 0.4
    assert overall["gold"] == 10 and overall["found"] == 2 and overall["recall"] == round(2 / 10, 3)
    assert t["by_category"]["change"]["wrong_current"] == 1 and t["by_category"]["change"]["precision"] == 0.5
    assert t["by_category"]["not_a_fact"]["traps"] == 1 and t["by_category"]["not_a_fact"]["recall"] is None
    assert t["by_category"]["unmatched"]["stored"] == 1
    assert tally([CONV], verdicts, sources=("note",))["overall"]["stored"] == 1


# ---- what the store holds ------------------------------------------------------------------------


def test_stored_items_read_attributes_with_past_values_aliases_relations_state_and_notes():
    mem = Memory("memory://", layers=["entities", "graph", "state", "summary"], options={"model": ScriptedModel()})
    scope = mem.scope("c")
    [m] = mem.add([{"role": "user", "content": "我从上海搬到深圳了。", "timestamp": T0.isoformat()}], user_id="c", thread_id="t1")
    user = {
        "name": "用户",
        "aliases": ["王磊"],
        "attributes": {
            "住在": {
                "value": "深圳",
                "source_ids": [m.id],
                "values": [{"value": "深圳", "source_ids": [m.id], "valid_from": T0.isoformat()}],
                "past": [{"value": "上海", "source_ids": [m.id], "until": T0.isoformat()}],
            }
        },
    }
    project = {"name": "星图项目", "aliases": ["星图"], "attributes": {}}
    old = {"source": "用户", "relation": "住在", "target": "上海", "source_key": "user", "target_key": "上海", "invalid_at": T0.isoformat()}
    new = {"source": "用户", "relation": "住在", "target": "深圳", "source_key": "user", "target_key": "深圳"}
    mem.store.records.apply(
        scope,
        [
            Change("put", "entity", "user", user, (m.id,), T0),
            Change("put", "entity", "星图项目", project, (m.id,), T0),
            Change("put", "relation", "a", old, (m.id,), T0),
            Change("put", "relation", "b", new, (m.id,), T0),
            Change("put", "state", "city", {"value": "深圳"}, (m.id,), T0),
        ],
        layer="test",
    )
    notes = {
        "items": [
            {"text": "用户住在上海", "subject": "用户", "predicate": "住在", "object": "上海", "superseded_at": T0.isoformat()},
            {"text": "用户说：「…」", "said": True},
        ]
    }
    mem.store.records.apply(mem.scope("c", "t1"), [Change("put", "summary", "summary", notes, (m.id,), T0)], layer="test")
    got = {(i.source, i.subject, i.predicate, i.object, i.status) for i in stored_items(mem, "c", ["t1"])}
    assert got == {
        ("profile", "用户", "住在", "深圳", "current"),
        ("profile", "用户", "住在", "上海", "past"),
        ("alias", "用户", "alias", "王磊", "current"),  # 星图 of 星图项目 is a spelling, not a statement
        ("relation", "用户", "住在", "上海", "past"),
        ("relation", "用户", "住在", "深圳", "current"),
        ("state", "用户", "city", "深圳", "current"),
        ("note", "用户", "住在", "上海", "past"),
    }
    quoted = next(i for i in stored_items(mem, "c", ["t1"]) if i.source == "profile")
    assert "我从上海搬到深圳了" in quoted.said


# ---- the run -------------------------------------------------------------------------------------


def scripted(messages, schema):
    """The extraction a model might give: statements for the turns it is shown (the assistant's
    suggestion too, as a small model does)."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    out = []
    if "我住在上海" in text:
        out += ["用户|住在|上海", "用户|使用|Tableau"]
    if "搬到深圳" in text:
        out += ["用户|搬到|深圳"]
    return json.dumps({"memories": out}, ensure_ascii=False)


def test_the_run_ingests_each_conversation_into_a_fresh_store_and_scores_it(tmp_path):
    other = {
        **GOOD,
        "id": "t2",
        "lang": "en",
        "turns": [
            {"at": "2026-03-01T10:00:00-05:00", "user": "I live in Boston.", "assistant": "Nice!"},
            {"at": "2026-03-02T10:00:00-05:00", "user": "I like chess.", "assistant": "Try Lichess."},
        ],
        "gold": [
            {"subject": "user", "predicate": "lives in", "object": "Boston", "status": "current", "whose": "user", "category": "plain"}
        ],
    }
    path = _write(tmp_path, [GOOD, other])
    model = ScriptedModel(default=scripted)
    report = run(path, systems_for(strategies=["entities,graph"]), model=model)
    assert report["conversations"] == 2 and report["gold"] == 3 and report["traps"] == 1 and report["turns"] == 8
    s = report["systems"]["entities,graph"]
    assert set(s["overall"]) >= {
        "stored",
        "correct",
        "precision",
        "gold",
        "found",
        "recall",
        "wrong_current",
        "wrong_status",
        "misattributed",
        "unmatched",
    }
    assert s["overall"]["stored"] == len([r for r in s["items"] if r["source"] != "note"]) and s["overall"]["stored"] > 0
    assert s["cost"]["model_calls"] > 0 and s["cost"]["turns"] == 8 and s["failed_jobs"] == 0
    assert all(r["conversation"] == "t1" for r in s["items"])  # the second user's store holds nothing of the first's
    assert {m["conversation"] for m in s["missed"]} >= {"t2"}
    again = rescore(json.loads(json.dumps(report)), path)  # a saved report, scored again without ingesting
    assert again["systems"]["entities,graph"]["overall"] == s["overall"] and again["systems"]["entities,graph"]["cost"] == s["cost"]
    table = format_report(report)
    assert "| **all** |" in table and "wrong current" in table and "entities,graph" in table
    assert run(path, systems_for(strategies=["entities"]), model=model, limit=1)["conversations"] == 1
    with pytest.raises(InvalidInput):
        run(path, systems_for(strategies=["entities"]), model=model, only=["nobody"])


def test_the_command_prints_the_table_and_writes_the_json(tmp_path):
    path = _write(tmp_path, [GOOD])
    with CannedOpenAI(lambda body: json.dumps({"memories": ["用户|住在|深圳"]}, ensure_ascii=False)) as upstream:
        env = {**os.environ, "MEMSTACK_HOME": str(tmp_path / "home")}
        out = tmp_path / "facts.json"
        args = [
            sys.executable,
            "-m",
            "memstack",
            "bench",
            "facts",
            "--layers",
            "entities",
            "--model",
            upstream.model,
            "--data",
            str(path),
            "--json",
            str(out),
        ]
        proc = subprocess.run(args, capture_output=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()
        assert "| **all** |" in proc.stdout.decode()
        report = json.loads(out.read_text(encoding="utf-8"))
        assert report["systems"]["entities"]["overall"]["stored"] >= 1 and report["conversations"] == 1
    proc = subprocess.run(
        [sys.executable, "-m", "memstack", "bench", "facts", "--layers", "entities", "--data", str(tmp_path / "nowhere")],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode != 0 and "no fact conversations" in proc.stderr.decode() and "Traceback" not in proc.stderr.decode()
    proc = subprocess.run(
        [sys.executable, "-m", "memstack", "bench", "facts", "--data", str(path)], capture_output=True, env=env, timeout=60
    )
    assert proc.returncode == 2 and "--preset or --layers" in proc.stderr.decode()


@pytest.mark.local_model
@pytest.mark.timeout(240)
def test_two_short_conversations_on_the_local_model_give_a_report():
    pytest.importorskip("xllamacpp")
    report = run(DEFAULT_DATA, systems_for(strategies=["entities,graph"]), model="local", only=["zh-03-lisi", "en-04-soda"])
    s = report["systems"]["entities,graph"]
    assert report["conversations"] == 2 and s["failed_jobs"] == 0
    assert s["overall"]["stored"] == sum(
        s["overall"][k] for k in ("correct", "wrong_current", "wrong_status", "misattributed", "unmatched")
    )
    assert set(s["by_category"]) <= {*CATEGORIES, "unmatched"} and s["cost"]["model_calls"] > 0
