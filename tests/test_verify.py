"""What the model-backed layers store is checked against the user's own words (``layers.verify``):
right or absent. Each case is a statement a model wrote (several are real ones from the local
model) and the turns it came from."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory
from memstack.layers.verify import Rejected, check, verify
from memstack.llm.extract import Statement
from memstack.testing import ScriptedModel
from memstack.types import Message

T0 = datetime(2026, 3, 1, 9, tzinfo=timezone.utc)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def bot(text: str) -> Message:
    return Message(role="assistant", content=text)


def st(subject: str, predicate: str, obj: str) -> Statement:
    return Statement(subject=subject, predicate=predicate, object=obj)


def verdict(statement: Statement, *turns: Message, names=()) -> Statement | Rejected:
    return check(statement, list(turns), names={n for n in names}, self_names=())


CASES_KEPT = [
    # (statement, turns, what is stored: predicate, object, past)
    (st("用户", "住在", "上海"), [user("我叫王磊，住在上海，在招商银行做数据分析师。")], ("住在", "上海", False)),
    (st("用户", "做", "数据分析"), [user("我也换工作了，现在在腾讯做产品经理，不再做数据分析了。")], ("做", "数据分析", True)),
    (st("用户", "抽", "烟"), [user("我上个月戒掉了烟。")], ("抽", "烟", True)),
    (st("李四", "以前住", "上海"), [user("李四以前住在上海，上个月搬到深圳了。")], ("住", "上海", True)),
    (st("李四", "上个月（2026年4月）搬到", "深圳"), [user("李四以前住在上海，上个月搬到深圳了。")], ("搬到", "深圳", False)),
    (st("星图项目", "使用", "Kafka"), [user("星图项目使用Kafka。")], ("使用", "Kafka", False)),
    (st("Redis", "用于", "缓存"), [user("缓存使用Redis")], ("用于", "缓存", False)),
    (st("张伟", "负责", "星图项目"), [user("张伟是我们部门的后端工程师，他负责星图项目。")], ("负责", "星图项目", False)),
    (st("张伟", "是", "后端工程师"), [user("张伟是我们部门的后端工程师，他负责星图项目。")], ("是", "后端工程师", False)),
    (st("我妹妹", "住在", "杭州"), [user("我妹妹住在杭州。")], ("住在", "杭州", False)),
    (
        st("知识中台", "后端使用", "SpringBoot"),
        [user("我正在开发一个知识中台"), bot("好的"), user("后端使用SpringBoot")],
        ("后端使用", "SpringBoot", False),
    ),
    (st("用户", "搬到", "杭州"), [user("我打算明年搬到杭州。")], ("打算搬到", "杭州", False)),
    (st("用户", "喜欢", "Python"), [user("我喜欢Python，也在学Rust。")], ("喜欢", "Python", False)),
    (st("用户", "不喜欢", "香菜"), [user("我不喜欢香菜。")], ("不喜欢", "香菜", False)),
    (st("user", "works at", "Google"), [user("I no longer work at Google, I joined a startup.")], ("works at", "Google", True)),
    (st("user", "smoking", "cigarettes"), [user("I quit cigarettes last year.")], ("smoking", "cigarettes", True)),
    (st("user", "lives in", "Boston"), [user("I'm thinking about moving to Boston.")], ("thinking about lives in", "Boston", False)),
    (st("user", "uses", "Go"), [user("Our backend is written in Go now.")], ("uses", "Go", False)),
    # a time word that governs the value puts it before now; one that governs another verb does not
    (st("用户", "喝过", "埃塞"), [user("埃塞的之前喝过，太酸了，俺真喝不惯。")], ("喝过", "埃塞", True)),
    (st("用户", "干", "销售"), [user("俺之前在北京干了五年销售，后来转行当健身教练了。")], ("干", "销售", True)),
    (st("用户", "学", "小提琴"), [user("我自己以前也学过小提琴，后来没坚持。")], ("学", "小提琴", True)),
    (st("user", "lives in", "Denver"), [user("I used to live in Denver.")], ("lives in", "Denver", True)),
    (st("用户", "住在", "杭州"), [user("我之前说过我住在杭州。")], ("住在", "杭州", False)),
    (st("用户", "看", "小说"), [user("我睡觉之前一般看小说。")], ("看", "小说", False)),
    (st("用户", "喜欢", "跑步"), [user("我之前就喜欢跑步。")], ("喜欢", "跑步", False)),
    (st("user", "swims", "pool"), [user("Once a week I swim at the pool.")], ("swims", "pool", False)),
]


@pytest.mark.parametrize(
    ("statement", "turns", "stored"), CASES_KEPT, ids=[f"{s.subject}|{s.predicate}|{s.object}" for s, _, _ in CASES_KEPT]
)
def test_a_statement_the_users_words_support_is_kept_tidied(statement, turns, stored):
    got = verdict(statement, *turns, names={"星图项目", "张伟", "李四"})
    assert not isinstance(got, Rejected), got
    assert (got.predicate, got.object, got.past) == stored


CASES_REJECTED = [
    # (statement, turns, names the batch's other statements give as subjects, the reason's start)
    (
        st("用户", "使用", "Kafka"),
        [user("张伟负责星图项目。星图项目使用Kafka和PostgreSQL。")],
        ["星图项目", "张伟"],
        "the words say it of 星图项目",
    ),
    (
        st("张伟", "使用", "Flink"),
        [user("张伟负责星图项目，李娜负责天枢项目，天枢用的是Flink。")],
        ["李娜", "天枢项目"],
        "the words say it of",
    ),
    (st("用户", "不喜欢", "数据分析"), [user("我也换工作了，现在在腾讯做产品经理，不再做数据分析了。")], [], "the words do not say 不喜欢"),
    (st("用户", "喜欢", "香菜"), [user("我不喜欢香菜。")], [], "negated in the user's words"),
    (st("用户", "吃", "香菜"), [user("我从来不吃香菜。")], [], "negated in the user's words"),
    (st("用户", "住在", "杭州"), [user("我妹妹住在杭州。")], [], "the words say it of 我妹妹"),
    (st("用户", "使用", "Redis"), [user("缓存怎么做比较好？"), bot("你可以试试用Redis做缓存。")], [], "not in the user's own words"),
    (st("用户", "使用", "Go"), [user("我要不要把后端换成Go？")], [], "asked, not said"),
    (st("用户", "住在", "杭州"), [user("如果我搬到杭州，房租会便宜一点")], [], "a supposition"),
    (st("user", "likes", "cilantro"), [user("I don't like cilantro at all.")], [], "the words do not say"),
    (st("user", "eats", "cilantro"), [user("I don't eat cilantro.")], [], "negated in the user's words"),
    (st("user", "lives in", "Boston"), [user("My wife lives in Boston.")], [], "the words say it of my wife"),
    (st("user", "uses", "Redis"), [user("Which cache should I use?"), bot("Redis is a good choice.")], [], "not in the user's own words"),
    (st("user", "lives in", "Denver"), [user("If I moved to Denver, would rent be cheaper")], [], "a supposition"),
]


@pytest.mark.parametrize(
    ("statement", "turns", "names", "reason"),
    CASES_REJECTED,
    ids=[f"{s.subject}|{s.predicate}|{s.object}" for s, _, _, _ in CASES_REJECTED],
)
def test_a_statement_the_users_words_do_not_support_is_dropped_with_its_reason(statement, turns, names, reason):
    got = verdict(statement, *turns, names=set(names))
    assert isinstance(got, Rejected), got
    assert got.reason.startswith(reason), got.reason


def test_a_predicate_that_swallowed_its_value_is_split_back():
    """A real statement of the local model: "王磊|住在上海|招商银行" (the profile read 住在上海=招商银行)."""
    got = verify([st("王磊", "住在上海", "招商银行")], [user("我叫王磊，住在上海，在招商银行做数据分析师。")], self_names=["王磊"])
    assert [(s.subject, s.predicate, s.object) for s in got.kept] == [("王磊", "住在", "上海")] and not got.rejected


def out(*statements: tuple[str, str, str]) -> str:
    import json

    return json.dumps({"memories": ["|".join(s) for s in statements]}, ensure_ascii=False)


def test_the_profile_holds_what_was_said_and_the_audit_what_was_not(tmp_path):
    """Issue 27's first case, with the local model's real statements scripted: the profile shows
    深圳 as current, 上海 past, the new job current and 数据分析 ended; the inverted statement is
    in the audit trail with its reason, not in the profile."""
    model = ScriptedModel(
        [
            out(("王磊", "住在上海", "招商银行")),
            out(
                ("用户", "搬到", "上海"),
                ("用户", "搬到", "深圳"),
                ("用户", "换工作", "腾讯"),
                ("用户", "不喜欢", "数据分析"),
                ("用户", "换工作", "数据分析"),
            ),
        ]
    )
    mem = Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=["profile"], options={"model": model, "batch_messages": 2})
    mem.add(
        [
            {"role": "user", "content": "我叫王磊，住在上海，在招商银行做数据分析师。", "timestamp": T0.isoformat()},
            {"role": "assistant", "content": "你好王磊！", "timestamp": T0.isoformat()},
        ],
        user_id="u",
        thread_id="s1",
    )
    mem.run_jobs()
    later = T0 + timedelta(days=70)
    mem.add(
        [
            {"role": "user", "content": "我上个月从上海搬到深圳了。", "timestamp": later.isoformat()},
            {"role": "assistant", "content": "搬家辛苦了！你可以试试在南山找房子。", "timestamp": later.isoformat()},
            {"role": "user", "content": "我也换工作了，现在在腾讯做产品经理，不再做数据分析了。", "timestamp": later.isoformat()},
            {"role": "assistant", "content": "恭喜！", "timestamp": later.isoformat()},
        ],
        user_id="u",
        thread_id="s2",
    )
    mem.run_jobs()
    me = mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]
    assert me["住在"]["value"] == "深圳" and [p["value"] for p in me["住在"]["past"]] == ["上海"]
    # "换工作" is the predicate 工作 said as a change (``supersede.canonical``): one attribute
    assert me["工作"]["value"] == "腾讯" and [p["value"] for p in me["工作"]["past"]] == ["数据分析"]
    assert not any("住在上海" in k or "不喜欢" in k for k in me)
    text = mem.context(user_id="u", thread_id="s3", query="我现在住在哪个城市？", max_tokens=2000).messages[0].text
    assert "住在=深圳" in text and "不喜欢" not in text
    rejected = mem.store.records.audit(mem.scope("u"), kind="rejected")
    assert [(e.after["statement"], e.after["reason"]) for e in rejected] == [("用户|不喜欢|数据分析", "the words do not say 不喜欢")]
