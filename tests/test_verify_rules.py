"""The rules that keep a stale or inverted value from standing as current (issue 27, `bench facts`):
each rule follows from how people speak, and each is tested here in Chinese and English with
sentences written for these tests (none from ``bench/data/facts``).

- a new value said under another spelling of its attribute ("换教练", "new manager") is that
  attribute's new value and supersedes the old one;
- a cessation ends every current value of its owner that it names ("已经不去游泳馆了", "I gave up
  tennis", "自行车卖给了同事", "migrated from Jenkins to …"), even with no statement written for it;
- an attribute's name that holds a number, a frequency or a value of its own is no relation;
- an object that lists values is one value each; one that is a clause or a bare verb is dropped;
- a negation or cessation ends only what it governs (the object right after it), never the new
  value of the next sentence, nor the date it was said with;
- a value said earlier never supersedes one said later, whatever order the batches are applied in.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from chats import statements, system, turns_from

from memstack import Memory
from memstack.layers.attributes import attribute_values
from memstack.layers.attributes import update_attribute as _update_attribute
from memstack.layers.supersede import canonical, change_cue, replaced, says_change
from memstack.layers.verify import Rejected, cessations, check, ends_value, goes_with, shape, verify
from memstack.llm.extract import Statement
from memstack.testing import ScriptedModel
from memstack.types import Message

T0 = datetime(2026, 9, 7, 9, 0, tzinfo=timezone.utc)
turns = turns_from(T0)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def st(subject: str, predicate: str, obj: str) -> Statement:
    return Statement(subject=subject, predicate=predicate, object=obj)


def memory(tmp_path, layers, answers):
    return Memory(f"sqlite:///{tmp_path / 'm.db'}", layers=layers, options={"model": ScriptedModel(answers), "batch_messages": 2})


def said(mem, *batches, thread="t"):
    for texts, start in batches:
        mem.add(turns(texts, start), user_id="u", thread_id=thread)
        assert mem.run_jobs().failed == 0


def me(mem):
    return mem.store.records.current(mem.scope("u"), "entity", ["user"])[0].value["attributes"]


def values(attribute):
    now, before = attribute_values(attribute)
    return [v["value"] for v in now], [v["value"] for v in before]


# ---- 1. a change verb before a noun: the noun is the attribute ---------------------------------


@pytest.mark.parametrize(
    ("spelling", "attribute"),
    [
        ("换教练", "教练"),
        ("换了教练", "教练"),
        ("新教练", "教练"),
        ("换手机", "手机"),
        ("new manager", "manager"),
        ("new coach", "coach"),
        ("changed jobs", "job"),
        ("new job", "job"),
        ("新家", "住在"),
        ("改名", "名字"),
    ],
)
def test_a_change_verb_before_a_noun_is_that_nouns_attribute(spelling, attribute):
    assert canonical(spelling) == attribute
    assert says_change(spelling)  # its value is the new one


@pytest.mark.parametrize("word", ["改变", "换算", "新闻", "changes", "newsletter"])
def test_words_that_only_begin_like_a_change_are_left_alone(word):
    assert canonical(word) == word


def test_a_new_coach_supersedes_the_old_one_though_the_model_spelt_the_attribute_as_the_change(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "教练", "张教练")), statements(("用户", "人物", "换教练", "刘教练"))])
    said(mem, (["我在健身，教练是张教练。", "好的"], T0), (["我换教练了，现在跟刘教练练拳击。", "好的"], T0 + timedelta(days=30)))
    assert values(me(mem)["教练"]) == (["刘教练"], ["张教练"])


def test_an_english_new_coach_supersedes_the_old_one(tmp_path):
    mem = memory(
        tmp_path, ["profile"], [statements(("User", "person", "coach", "Tom")), statements(("User", "person", "new coach", "Priya"))]
    )
    said(mem, (["My swimming coach is Tom.", "ok"], T0), (["I have a new coach now, Priya.", "ok"], T0 + timedelta(days=30)))
    assert values(me(mem)["coach"]) == (["Priya"], ["Tom"])


# ---- 2. a cessation ends what it names, written as a statement or not --------------------------


@pytest.mark.parametrize(
    ("said_text", "ended"),
    [
        ("我已经不去游泳馆了，改成在小区里跑步。", "游泳馆"),
        ("上个月我把自行车卖给了同事。", "自行车"),
        ("思域上周卖掉了，现在坐地铁。", "思域"),
        ("日志已经从Elasticsearch迁移到了Loki。", "elasticsearch"),
        ("我们把Jenkins换成了GitLab CI。", "jenkins"),
        ("I gave up tennis after the injury.", "tennis"),
        ("I don't eat meat anymore.", "meat"),
        ("We switched from Jenkins to GitHub Actions.", "jenkins"),
        ("I stopped going to the climbing gym.", "climbing gym"),
        # after its object said first as a topic
        ("写周报的事我早就不管了，交给助理了。", "写周报"),
        ("游泳我已经不游了。", "泳"),
        ("网球也没再打过。", "网球"),
        ("法国也不打算去了。", "法国"),
    ],
)
def test_a_cessation_names_the_object_it_governs(said_text, ended):
    assert [c.object for c in cessations([user(said_text)])] == [ended]


def test_a_person_said_first_is_the_one_who_stopped():
    assert cessations([user("老周早就不干了。")]) == [] and cessations([user("我表哥已经不住了。")]) == []
    (c,) = cessations([user("爸爸早就不开车了。")])
    assert c.object == "车" and c.whose == "爸爸"


@pytest.mark.parametrize(
    "said_text",
    [
        "我不吃香菜。",
        "如果我不再上班了会怎样？",
        "今天太累，不去健身房了。",
        "香菜我不吃。",
        "今天健身房我就不去了。",
        "I don't like cilantro.",
        "Should I quit my job?",
        "I left my keys at the office.",
        "I dropped my kids at school.",
    ],
)
def test_a_plain_negation_a_supposition_or_a_question_ends_nothing(said_text):
    assert cessations([user(said_text)]) == []


def test_a_cessation_of_someone_else_is_theirs():
    (c,) = cessations([user("我哥已经不住在成都了。")])
    assert c.object == "成都" and c.whose == "我哥"
    (c,) = cessations([user("My wife no longer works at the bank.")])
    assert c.object == "bank" and c.whose == "my wife"


def test_what_a_cessation_ends_a_value_or_the_attribute_that_names_it():
    (quit,) = cessations([user("I quit drinking in March.")])
    assert ends_value(quit, "drinks", "on weekends")  # the attribute is the thing quit
    assert not ends_value(quit, "quit drinking", "March")  # the statement of the quitting itself
    (stop,) = cessations([user("我已经不喝奶茶了，改喝白开水。")])
    assert ends_value(stop, "喝", "每天一杯奶茶") and not ends_value(stop, "喝", "白开水")
    assert ends_value(stop, "喝奶茶", "下午") and not ends_value(stop, "不再喝", "奶茶")


def test_a_cessation_ends_the_thing_it_names_not_a_name_that_begins_with_it():
    (moved,) = cessations([user("我去年离开了北京。")])
    assert ends_value(moved, "住在", "北京") and not ends_value(moved, "毕业于", "北京大学")
    (short,) = cessations([user("我现在不做推荐了。")])
    assert ends_value(short, "做", "推荐系统")  # the same verb: the name said short
    (chess,) = cessations([user("I stopped playing chess.")])
    assert ends_value(chess, "plays", "chess online") and not ends_value(chess, "likes", "chess boxing")
    (job,) = cessations([user("我辞掉了北京的工作。")])
    assert not ends_value(job, "住在", "北京")
    (sold,) = cessations([user("I sold my old Toyota.")])
    assert ends_value(sold, "drives", "Toyota") and ends_value(sold, "drives", "an old Toyota")
    (gym,) = cessations([user("I stopped going to the gym.")])
    assert ends_value(gym, "has", "membership at the gym") and not ends_value(gym, "likes", "gym class playlists")


def test_a_cessation_with_no_statement_for_it_ends_the_value_in_the_profile_and_the_graph(tmp_path):
    mem = memory(tmp_path, ["profile", "graph"], [statements(("用户", "人物", "每周去", "游泳馆")), statements()])
    said(
        mem,
        (["我办了游泳馆的卡，每周去游泳馆。", "好的"], T0),
        (["我已经不去游泳馆了，改成在小区里跑步。", "也不错"], T0 + timedelta(days=40)),
    )
    assert values(me(mem)["去"]) == ([], ["游泳馆"])  # ("每周去": the frequency is no part of the name)
    (relation,) = mem.store.records.current(mem.scope("u"), "relation")
    assert relation.value["target"] == "游泳馆" and relation.value["invalid_at"].startswith("2026-10-17")


def test_an_english_cessation_ends_the_attribute_it_names(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [
            statements(("User", "person", "plays", "tennis"), ("User", "person", "drinks", "beer")),
            statements(("User", "person", "drinks", "kombucha")),
        ],
    )
    said(
        mem,
        (["I play tennis and I drink beer on weekends.", "ok"], T0),
        (["I gave up tennis. And I no longer drink beer. I switched to kombucha.", "ok"], T0 + timedelta(days=40)),
    )
    attributes = me(mem)
    assert values(attributes["plays"]) == ([], ["tennis"])
    assert values(attributes["drinks"]) == (["kombucha"], ["beer"])


@pytest.mark.parametrize(
    ("sentence", "ended", "value", "goes"),
    [
        ("我办了游泳馆的年卡，每周去两次，主要练蛙泳。", "游泳馆", "蛙泳", True),
        ("我办了游泳馆的年卡，每周去两次，主要练蛙泳。", "游泳馆", "每周两次", True),
        ("I have a climbing gym pass, usually go on Fridays, mostly bouldering.", "climbing gym", "bouldering", True),
        # what "we" do right after a group the user is in is the group's
        ("I play bass in a cover band, we rehearse on Sundays at a studio in Brooklyn.", "band", "Sundays", True),
        ("我在公司的篮球队打后卫，我们每周三晚上训练。", "篮球队", "每周三晚上", True),
        ("I work at a bakery, we open at six.", "bakery", "six", False),  # not a group
        # a clause with its own subject or setting is another fact
        ("我办了游泳馆的年卡，我主要练蛙泳。", "游泳馆", "蛙泳", False),
        ("我在星河科技上班，住在滨江。", "星河科技", "滨江", False),
        ("我在星河科技上班，平时住在滨江。", "星河科技", "滨江", False),
        ("I have a climbing gym pass, my sister mostly goes bouldering.", "climbing gym", "bouldering", False),
        # a clause that does not say how the one before is done, or anything said before the ended one
        ("我办了游泳馆的年卡，也养了一只猫。", "游泳馆", "猫", False),
        ("我主要练蛙泳，办了游泳馆的年卡。", "游泳馆", "蛙泳", False),
        ("我办了游泳馆的年卡练蛙泳。", "游泳馆", "蛙泳", False),
    ],
)
def test_what_goes_with_an_ended_value_is_said_as_a_part_of_it(sentence, ended, value, goes):
    assert goes_with(sentence, ended, value) is goes


@pytest.mark.parametrize(
    ("sentence", "ended", "value", "role", "goes"),
    [
        ("我在仁济医院当药剂师，干了五年。", "仁济", "药剂师", True, True),  # a job ended: the role held there
        ("I work at Mercy Hospital as a pharmacist.", "mercy hospital", "pharmacist", True, True),
        ("我在仁济医院当药剂师，干了五年。", "仁济", "药剂师", False, False),  # a move, a sale: not a job ended
        ("我在仁济医院附近开了一家花店。", "仁济", "花店", True, False),  # not a role held there
        ("我在上海当药剂师。", "药剂师", "上海", True, False),  # said before it
    ],
)
def test_a_job_ended_ends_the_role_held_there(sentence, ended, value, role, goes):
    assert goes_with(sentence, ended, value, role=role) is goes


def test_resigning_ends_the_role_held_at_the_place_and_the_name_introduced_is_the_user(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("陈嘉怡", "人物", "是", "药剂师")), statements(("用户", "人物", "辞职", "仁济"), ("用户", "人物", "做", "销售"))],
    )
    said(
        mem,
        (["我是陈嘉怡，在仁济医院当药剂师。", "好的"], T0),
        (["我从仁济辞职了，现在在一家药企做销售。", "祝顺利"], T0 + timedelta(days=60)),
    )
    attributes = me(mem)  # "我是陈嘉怡，…": the name stands alone, so 陈嘉怡 is the user
    assert values(attributes["是"]) == ([], ["药剂师"])
    assert values(attributes["做"]) == (["销售"], [])


def test_a_cessation_ends_what_was_said_as_a_part_of_the_value_it_ends(tmp_path):
    mem = memory(
        tmp_path,
        ["profile", "graph"],
        [
            statements(("用户", "人物", "办", "游泳馆的年卡"), ("用户", "人物", "练", "蛙泳"), ("用户", "人物", "住在", "滨江")),
            statements(),
        ],
    )
    said(
        mem,
        (["我办了游泳馆的年卡，每周去两次，主要练蛙泳。我住在滨江。", "好的"], T0),
        (["游泳卡到期了，我已经不去游泳馆了，改成去公园骑车。", "也不错"], T0 + timedelta(days=40)),
    )
    attributes = me(mem)
    assert values(attributes["办"]) == ([], ["游泳馆的年卡"])
    assert values(attributes["练"]) == ([], ["蛙泳"])  # said as the pool's: it ended with it
    assert values(attributes["住在"]) == (["滨江"], [])  # its own sentence: it stays
    relations = {r.value["target"]: r.value.get("invalid_at") for r in mem.store.records.current(mem.scope("u"), "relation")}
    assert relations["蛙泳"].startswith("2026-10-17") and relations["游泳馆的年卡"].startswith("2026-10-17") and not relations["滨江"]


@pytest.mark.parametrize(
    ("said_text", "predicate", "value", "ended"),
    [
        ("我上个月戒烟了。", "抽", "中华香烟", True),  # a kind of what was ended: the head of the word
        ("我现在不打球了。", "打", "羽毛球", True),
        ("我现在不打球了。", "看", "羽毛球", False),  # another verb said with it: not what ended
        ("我戒酒了，不过黄酒做菜还用。", "用", "黄酒", False),  # a kind named beside the cessation
        ("我现在不打球了。", "打", "球拍", False),  # not a kind of 球
    ],
)
def test_a_one_character_thing_ended_ends_its_kinds(said_text, predicate, value, ended):
    (c,) = cessations([user(said_text)])
    assert ends_value(c, predicate, value) is ended


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        (st("User", "next to", "library"), None),
        (st("User", "beside", "the library"), None),
        (st("User", "near", "library"), "the predicate is no verb or relation"),
        (st("User", "everything", "ready"), "the predicate is no verb or relation"),
        (st("User", "never", "swim"), "the predicate is only a negation, not a relation"),
        (st("用户", "不再", "游泳"), "the predicate is only a negation, not a relation"),
        (st("User", "swims", "every morning"), "the object is a time or a frequency, not a value"),
        (st("用户", "游泳", "每天"), "the object is a time or a frequency, not a value"),
        (st("用户", "游泳时间", "每天"), None),  # a predicate that names a time takes one
        (st("User", "swims at", "the YMCA"), None),
        (st("User", "doesn't swim in", "either"), "the object is a time word, not a value"),
        # a one-character predicate that is a word of place, a measure word or a particle
        (st("用户", "底", "入职"), "the predicate is no verb or relation"),
        (st("用户", "的", "书店"), "the predicate is no verb or relation"),
        (st("用户", "开", "书店"), None),
        (st("用户", "家", "河西"), None),
    ],
)
def test_a_statement_with_no_relation_or_no_value_is_dropped(statement, reason):
    words = [
        user(
            "I live next to the library, beside the library. Everything is ready. I never swim. "
            "I swim every morning at the YMCA. 我不再游泳了。我每天游泳，游泳时间每天。"
            "我是上个月底入职的，开的书店。我晚上上夜校。我家河西。"
        )
    ]
    shaped = shape(statement, words)
    assert (shaped.reason if isinstance(shaped, Rejected) else None) == reason


def test_a_thing_sold_is_no_longer_the_users(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "骑", "捷安特自行车")), statements()])
    said(mem, (["我上下班骑一辆捷安特自行车。", "好的"], T0), (["捷安特自行车卖给了我同事。", "好的"], T0 + timedelta(days=40)))
    assert values(me(mem)["骑"]) == ([], ["捷安特自行车"])


def test_someone_elses_cessation_leaves_the_users_value(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "住在", "成都")), statements()])
    said(mem, (["我住在成都。", "好的"], T0), (["我哥已经不住在成都了，他去了重庆。", "好的"], T0 + timedelta(days=40)))
    assert values(me(mem)["住在"]) == (["成都"], [])


def test_a_value_said_after_the_cessation_stays_current(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(), statements(("用户", "人物", "喝", "奶茶"))])
    said(mem, (["我已经不喝奶茶了。", "好的"], T0), (["最近又开始喝奶茶了。", "好的"], T0 + timedelta(days=40)))
    assert values(me(mem)["喝"]) == (["奶茶"], [])


# ---- 3 and 4. attribute names and objects in the shape of a relation ----------------------------


@pytest.mark.parametrize(
    ("statement", "words", "reason"),
    [
        (st("用户", "每周排练两次", "乐队"), "我在乐队里主要弹吉他，每周排练两次。", "the predicate holds a number"),
        (st("用户", "每周排练两次", "乐队"), "我在乐队里弹吉他，每周排练两次。", "the predicate holds a number"),
        (st("user", "runs three times a week", "park"), "I run three times a week, usually in the park.", "the predicate holds a number"),
        (st("用户", "嗓子哑了", "乐队"), "我在乐队里唱歌，最近嗓子哑了。", "the predicate is a clause"),
        (st("用户", "喝茶", "每天下午"), "我每天下午都去散步，也喝茶。", "the time is said of something else"),
    ],
)
def test_a_predicate_that_is_a_clause_of_the_words_is_no_relation(statement, words, reason):
    got = shape(statement, [user(words)])
    assert isinstance(got, Rejected) and got.reason.startswith(reason), got


@pytest.mark.parametrize(
    ("statement", "words", "shaped"),
    [
        (st("用户", "主要弹吉他", "乐队"), "我在乐队里主要弹吉他，每周排练两次。", ("弹", "吉他")),
        (st("用户", "做后端开发", "Go"), "我在一家游戏公司做后端开发，平时写Go。", ("做", "后端开发")),
        (st("用户", "养了三条狗", "旺财"), "我养了三条狗，最大的叫旺财。", ("养", "狗")),  # the count left out
        (st("用户", "每周去两次", "游泳馆"), "我办了游泳馆的卡，每周去两次。", ("去", "游泳馆")),  # the verb of its object
        (st("用户", "开一辆黑色的凯美瑞", "上班"), "我开一辆黑色的凯美瑞上班。", ("开", "黑色的凯美瑞")),
        (st("用户", "喜欢吃", "火锅"), "我喜欢吃火锅。", ("喜欢吃", "火锅")),  # the object is right after it: a relation
        (st("用户", "喜欢", "游泳"), "我喜欢很多运动，特别是游泳。", ("喜欢", "游泳")),  # an example of it
        (st("用户", "戒酒", "啤酒"), "我去年戒酒了，不过啤酒偶尔还喝。", None),  # the object has its own verb
        (st("用户", "吃素", "鸡蛋"), "我开始吃素了，但鸡蛋还吃。", ("吃", "鸡蛋")),  # the same verb: its object
        (st("用户", "是一名", "程序员"), "我叫小周，是一名程序员。", ("是", "程序员")),  # "a", not a count
        (st("用户", "当了一名", "老师"), "我毕业后当了一名老师。", ("当", "老师")),
    ],
)
def test_a_predicate_that_swallowed_its_value_is_split_back_into_verb_and_value(statement, words, shaped):
    got = shape(statement, [user(words)])
    if shaped is None:
        assert isinstance(got, Rejected) and got.reason.startswith("the object is said with another verb"), got
    else:
        assert [(x.predicate, x.object) for x in got] == [shaped]


@pytest.mark.parametrize(
    ("statement", "objects"),
    [
        (st("用户", "使用", "Python、Go和Rust"), ["Python", "Go", "Rust"]),
        (st("用户", "使用", "平时用Figma、Sketch"), ["Figma", "Sketch"]),
        (st("user", "uses", "Figma and Sketch"), ["Figma", "Sketch"]),
        (st("用户", "去过", "杭州和平饭店"), ["杭州和平饭店"]),  # not a list: one name
    ],
)
def test_an_object_that_lists_values_is_one_statement_each(statement, objects):
    assert [s.object for s in shape(statement, [user("x")])] == objects


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        (st("用户", "做后端", "平时用Go、Java"), "the object is a clause"),
        (st("user", "agent", "looking for"), "the object is a verb phrase"),
        (st("user", "next", "Friday"), "the predicate is a time word"),
        (st("user", "drink tea", "now"), "the object is a time word"),
        (st("用户", "是", "上海一家银行做柜员"), "the object is a clause"),
        (st("小白", "是", "小白"), "the subject is its own object"),
        (st("user", "nurse", "some nights I barely sleep"), "the object is a clause"),
        (st("user", "baker", "been at it for ten years"), "the object is a clause"),
        (st("老师", "说", "下周要交论文"), "the predicate reports words"),
        (st("用户", "听说", "跑步伤膝盖"), "the predicate reports words"),
        (st("user", "my coach reckons", "ready for a marathon"), "the predicate reports words"),
    ],
)
def test_an_object_that_is_no_value_is_dropped(statement, reason):
    got = shape(statement, [user("x")])
    assert isinstance(got, Rejected) and got.reason.startswith(reason), got


def test_advice_a_novel_and_it_as_a_department_stay():
    for statement in (st("医生", "建议", "少喝咖啡"), st("用户", "喜欢看", "小说"), st("user", "works in", "IT")):
        assert not isinstance(shape(statement, [user("x")]), Rejected), statement


# ---- 5. a negation ends what it governs, not the new value beside it ----------------------------


@pytest.mark.parametrize(
    ("statement", "words", "past"),
    [
        (st("user", "is", "teacher"), "I left my job at the bank. I'm now a teacher.", False),
        (st("user", "eats", "tofu"), "I stopped eating meat. I eat tofu now.", False),
        (st("user", "quit band", "May"), "I quit my band in May.", False),  # when it ended: no value ended
        (st("user", "eats", "meat"), "I stopped eating meat. I eat tofu now.", True),
        (st("用户", "骑", "自行车"), "我不再开车上班了，改成骑自行车。", False),
        (st("用户", "开", "车"), "我不再开车上班了，改成骑自行车。", True),
        (st("用户", "戒烟", "去年冬天"), "我去年冬天戒烟了。", False),
    ],
)
def test_a_cessation_ends_only_the_object_it_governs(statement, words, past):
    got = check(statement, [user(words)])
    assert not isinstance(got, Rejected), got
    assert got.past is past


def test_a_negation_with_other_words_between_is_dropped_when_its_scope_is_unclear():
    got = check(st("用户", "做", "销售"), [user("我不想再跟着王经理他们做销售了。")])
    assert isinstance(got, Rejected)


@pytest.mark.parametrize(
    ("statement", "words", "reason"),
    [
        (st("用户", "计划", "TiDB"), "我们把MySQL换成了TiDB。", "the words say no plan"),
        (st("user", "plans", "Austin"), "I moved to Austin in June.", "the words say no plan"),
        (st("user", "is", "accountant"), "My accountant is Lisa.", "the words name something of the user's"),
        (st("用户", "是", "牙医"), "我的牙医姓李。", "the words name something of the user's"),
        (st("user", "uses", "storm"), "My flight got cancelled because of the storm.", "the words give it as a cause"),
        (st("用户", "有", "加班"), "因为加班，我没去聚会。", "the words give it as a cause"),
    ],
)
def test_what_the_words_do_not_state_of_the_user_is_dropped(statement, words, reason):
    got = check(statement, [user(words)])
    assert isinstance(got, Rejected) and got.reason.startswith(reason), got


def test_a_plan_word_the_words_put_in_the_future_is_kept_as_a_plan():
    got = check(st("用户", "计划", "搬到杭州"), [user("我明年搬到杭州。")])
    assert not isinstance(got, Rejected) and got.predicate == "计划"
    got = check(st("user", "plans", "Lisbon"), [user("We're going to Lisbon next month.")])
    assert not isinstance(got, Rejected)


def test_the_user_as_an_object_is_only_a_name_or_an_identity():
    assert not isinstance(check(st("小周", "是", "用户"), [user("我叫小周，在杭州工作。")]), Rejected)
    got = check(st("杭州", "很热闹", "用户"), [user("我叫小周，在杭州工作。")])
    assert isinstance(got, Rejected) and got.reason.startswith("the user is no value")


@pytest.mark.parametrize(
    ("words", "statement", "owner"),
    [
        ("我们组的支付服务用Go写的，缓存是Redis。", st("用户", "使用", "Redis"), "支付服务"),
        ("我是一名测试工程师，正在开发灯塔项目，数据库使用MySQL。", st("用户", "数据库使用", "MySQL"), "灯塔项目"),
        ("王芳负责北斗项目，北斗项目用的是Vue。", st("用户", "使用", "Vue"), "北斗项目"),
        ("我在华为集团工作，喜欢Rust。", st("用户", "喜欢", "Rust"), None),  # a place the user is at: not its owner
    ],
)
def test_a_project_or_service_named_in_the_sentence_owns_its_stack(words, statement, owner):
    # issue 27 §2: an object the words say of something else goes to that subject or nowhere
    got = verify([statement], [user(words)])
    if owner is None:
        assert not got.kept and got.rejected[0].reason.startswith("the words say it of")
    else:
        assert [(k.subject, k.object) for k in got.kept] == [(owner, statement.object)], got


# ---- 6. a value said earlier never supersedes one said later ------------------------------------


def test_an_older_value_applied_later_does_not_supersede_a_newer_one():
    newer = _update_attribute(
        None, "住在", {"value": "广州", "source_ids": ["b"], "valid_from": "2026-06-01T00:00:00+00:00"}, "我搬到广州了", "zh"
    )
    both = _update_attribute(
        newer, "住在", {"value": "厦门", "source_ids": ["a"], "valid_from": "2026-01-01T00:00:00+00:00"}, "我住在厦门", "zh"
    )
    assert values(both) == (["广州"], ["厦门"])
    assert both["past"][0]["until"].startswith("2026-06-01")


def test_batches_applied_out_of_order_keep_the_newest_current(tmp_path):
    mem = memory(
        tmp_path,
        ["profile", "graph"],
        [statements(("User", "person", "lives in", "Denver")), statements(("User", "person", "lives in", "Austin"))],
    )
    said(mem, (["I moved to Denver.", "ok"], T0 + timedelta(days=90)), thread="later")
    said(mem, (["I live in Austin.", "ok"], T0), thread="earlier")
    assert values(me(mem)["lives in"]) == (["Denver"], ["Austin"])
    current = {r.value["target"]: r.value.get("invalid_at") for r in mem.store.records.current(mem.scope("u"), "relation")}
    assert current["Denver"] is None and current["Austin"] is not None


def test_replaced_names_only_what_the_change_clause_names():
    assert replaced("使用", "我们把Hive换成了Iceberg，Airflow还在用。", ["Spark", "Airflow", "Hive"], "Iceberg") == ["Hive"]
    assert replaced("计划", "地点也改到厦门了", ["婚礼推迟到明年"], "地点改到厦门") == []  # the value says its own change
    assert replaced("教练", "我换教练了，现在跟刘教练练", ["张教练"], "刘教练", cue=True) == ["张教练"]


# ---- 7. a relative date carries its calendar date ------------------------------------------------


def test_a_relative_date_in_a_value_carries_its_calendar_date(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "体检时间", "下周四上午"))])
    said(mem, (["我体检定在下周四上午。", "好的"], T0))  # said on Monday 2026-09-07
    assert me(mem)["体检时间"]["value"] == "下周四（2026-09-17）上午"
    text = system(mem.context(user_id="u", thread_id="t2", strategy="profile", query="我哪天体检？", max_tokens=1000))
    assert "2026-09-17" in text


def test_a_relative_date_the_model_capitalised_is_dated_from_the_turn_that_said_it():
    from memstack.llm.extract import dated

    said = Message(role="user", content="My haircut is next Friday.", timestamp=T0)  # Monday 2026-09-07
    (got,) = dated([st("User", "haircut", "Next Friday")], [said], "en")
    assert got.object == "Next Friday (2026-09-18)"


@pytest.mark.parametrize(
    ("statement", "text"),
    [
        (st("用户", "住在", "西湖"), "我看中的是西湖那边一个门面，三十平，月租八千。"),  # a shop's place is no home
        (st("用户", "三", "结婚纪念日"), "下周三就是结婚纪念日了，得准备礼物。"),  # "三" is part of "周三"
        (st("用户", "狗散步", "旺财"), "家里还有只狗叫旺财，五岁了，特别能吃。"),
        (st("用户", "是", "大三"), "我在南京读计算机，现在大三。"),  # no copula says it
        (st("用户", "使用", "钓竿"), "周末我就去江边甩两竿，钓竿是朋友送的。"),
    ],
)
def test_a_predicate_the_words_do_not_say_is_dropped_with_its_reason(statement, text):
    """The extraction prompt asks for the words' own verb or relation: a predicate the clause that
    says the object does not say is what the small model stored wrongly most often (issue 27)."""
    (got,) = verify([statement], [user(text)]).rejected
    assert got.reason == "the words do not say the predicate"


@pytest.mark.parametrize(
    ("statement", "text"),
    [
        (st("用户", "住在", "滨江"), "已经在滨江住了两周了，离公司很近。"),  # another spelling, as a word of its own
        (st("用户", "宠物", "柯基"), "我养了一只柯基，叫团子。"),  # a profile category, unsaid
        (st("用户", "开", "咖啡馆"), "我在成都开了一家咖啡馆。"),  # "开" inside "开了"
        (st("用户", "是", "插画师"), "我在杭州做插画师。"),  # 做 says the copula
        (st("用户", "体检时间", "下周五"), "我体检约在下周五。"),  # a said word and a category
        (st("用户", "职业", "护士"), "我在医院当护士，干了五年。"),
        (st("北斗平台", "用的是", "Kafka"), "北斗平台用的是Kafka。"),  # a spelling of 使用 with 的 in it
    ],
)
def test_a_predicate_the_words_say_or_a_profile_category_is_kept(statement, text):
    got = verify([statement], [user(text)])
    assert not got.rejected and got.kept, got


def test_what_the_words_say_of_a_named_person_is_not_the_users():
    """ "老王也交了作品，拍的日落": 老王 交 and 拍, not the user; a name the user goes with ("我和老陈"),
    a kin word's name and the user's own name ("我叫…") do not take the clause from the user."""
    said = [user("老王也交了作品，拍的江边日落。")]
    kept = verify([st("用户", "拍", "江边日落"), st("用户", "交", "作品")], said)  # no statement names 老王
    assert not kept.kept and {r.reason for r in kept.rejected} == {"the words say it of 老王"}
    assert [k.subject for k in verify([st("老王", "拍", "江边日落")], said).kept] == ["老王"]
    kept = verify([st("用户", "负责", "北斗系统"), st("用户", "负责", "灯塔项目")], [user("刘强负责灯塔项目，我负责北斗系统。")])
    assert [k.object for k in kept.kept] == ["北斗系统"]
    kept = verify([st("用户", "去", "水库")], [user("我和老陈周末去水库钓鱼。")])
    assert [k.object for k in kept.kept] == ["水库"]
    kept = verify([st("用户", "叫", "林晓"), st("用户", "工作于", "厦门")], [user("我叫林晓，在厦门工作。")])
    assert [k.object for k in kept.kept] == ["林晓", "厦门"]
    kept = verify([st("姐姐", "住在", "成都")], [user("我姐姐周敏住在成都。")])
    assert [k.object for k in kept.kept] == ["成都"]


def test_a_subject_that_is_a_clause_or_an_object_that_is_a_pronoun_is_no_fact():
    assert isinstance(shape(st("行，我挺满意的", "是", "我"), [user("行，我挺满意的。")]), Rejected)
    assert isinstance(shape(st("用户", "喜欢", "它"), [user("我挺喜欢它的。")]), Rejected)
    assert isinstance(shape(st("用户", "养", "猫"), [user("我养了一只猫。")]), list)


def test_a_role_said_again_after_resigning_stays(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("用户", "人物", "做", "药剂师")), statements(("用户", "人物", "辞职", "仁济"))],
    )
    said(
        mem,
        (["我在仁济医院做药剂师。", "好的"], T0),
        (["我从仁济辞职了。", "祝顺利", "下个月去社区医院，还是做药剂师。", "挺好"], T0 + timedelta(days=60)),
    )
    assert values(me(mem)["做"]) == (["药剂师"], [])


@pytest.mark.parametrize(
    ("said_text", "names"),
    [
        ("我是陈嘉怡，在仁济医院当药剂师。", ["陈嘉怡"]),
        ("你好，我是王磊。", ["王磊"]),
        ("我是药剂师，在仁济医院上班。", []),  # no name
        ("我是李老师的学生。", []),  # the name does not stand alone: someone else
    ],
)
def test_a_name_right_after_wo_shi_standing_alone_introduces_the_user(said_text, names):
    from memstack.layers.names import self_introduced

    assert self_introduced([user(said_text)], [], subjects=["陈嘉怡", "王磊", "李老师"]) == names


@pytest.mark.parametrize(
    ("statement", "text", "outcome"),
    [
        # the object said first, as the topic, and its verb negated after it
        (st("用户", "去", "日本"), "日本我也不打算去了，太贵。", "rejected"),
        (st("用户", "喝", "奶茶"), "奶茶我早就不喝了。", "past"),
        (st("用户", "玩", "游戏"), "游戏我早就不玩了。", "past"),
        (st("用户", "去过", "那家店"), "那家店我没去过。", "rejected"),
        (st("User", "afford", "new car"), "We wanted a new car but we can't afford it right now.", "rejected"),
        (st("User", "watch", "horror films"), "Horror films I never watch them, too scary.", "rejected"),
        # said and not negated: kept as said
        (st("用户", "喝", "咖啡"), "咖啡我每天都喝。", "current"),
        (st("User", "afford", "new car"), "We saved for a year and now we can afford a new car.", "current"),
    ],
)
def test_a_negation_after_an_object_said_first_governs_it(statement, text, outcome):
    got = verify([statement], [user(text)])
    if outcome == "rejected":
        assert not got.kept and got.rejected, got
    else:
        assert [k.object for k in got.kept] == [statement.object] and got.kept[0].past == (outcome == "past"), got


@pytest.mark.parametrize(
    ("statement", "text"),
    [
        (st("用户", "带", "外甥"), "我妈退休了，现在天天在家带我外甥。"),  # 我 owns the object; 我妈 does it
        (st("用户", "带", "孙子"), "爸妈身体还行，现在在家带我孙子。"),  # a kin word opens the sentence: its subject
        (st("User", "lives in", "Leeds"), "My mate Jo lives in Leeds."),
    ],
)
def test_a_relatives_deed_in_the_users_sentence_is_not_the_users(statement, text):
    got = verify([statement], [user(text)])
    assert not got.kept, got


@pytest.mark.parametrize(
    ("statement", "text", "reason"),
    [
        (
            st("用户", "本来年后打算", "在惠州买套房"),
            "本来年后打算在惠州买套房，首付都凑得差不多了，结果先不买了。",
            "a plan given up, not a fact",
        ),
        (
            st("User", "planned", "trip to Lisbon"),
            "we were going to do a trip to Lisbon but the flights got cancelled",
            "a plan given up, not a fact",
        ),
        (st("用户", "听", "你的"), "咖啡我听你的，全换成低因了。", "the object is a pronoun, not a value"),
        (st("用户", "毕业", "女儿"), "女儿毕业了，在伦敦一家事务所找到工作了。", "the object is the one who does it, not a value"),
    ],
)
def test_what_the_fifth_fresh_set_showed_is_dropped(statement, text, reason):
    got = verify([statement], [user(text)])
    assert not got.kept and got.rejected[0].reason == reason, got


def test_what_the_fifth_fresh_set_showed_does_not_drop_its_neighbours():
    assert verify([st("用户", "带", "女儿")], [user("周末我带女儿去公园。")]).kept
    assert verify([st("用户", "住在", "上海")], [user("我本来就住在上海。")]).kept  # 本来就: always, no plan
    assert verify([st("用户", "打算", "去日本")], [user("我打算下个月去日本。")]).kept
    assert [c.object for c in cessations([user("handed my notice in at the call centre, last day friday")])] == ["call centre"]
    said = "我这边也换组了，从后端转去做AI平台，Go也不怎么写了，天天Python。"
    assert [c.object for c in cessations([user(said)])] == ["后端", "go"]  # "不怎么…了": no longer much
    assert cessations([user("香菜我不怎么吃")]) == []  # never much: nothing ended


def test_a_place_the_tagger_reads_as_a_name_is_no_one_who_does_it():
    # jieba tags 岳麓区 "nr"; the move is the user's
    assert verify([st("用户", "计划", "搬到雨花区")], [user("我们家下个月从岳麓区搬到雨花区，离女儿学校近点。")]).kept


def test_a_person_spoken_of_before_is_the_subject_of_a_sentence_that_names_them():
    text = [user("小米最近开始学游泳了，试了好几家才挑的游泳馆。")]
    assert verify([st("用户", "学", "游泳")], text).kept  # who 小米 is, nothing says
    got = verify([st("用户", "学", "游泳")], text, people=["小米"])
    assert not got.kept and got.rejected[0].reason == "the words say it of 小米"
    assert verify([st("小米", "学", "游泳")], text, people=["小米"]).kept


def test_laughter_is_no_value():
    got = verify([st("用户", "跑不动了", "哈哈")], [user("马拉松早就不跑了，跑不动了哈哈。")])
    assert not got.kept and got.rejected[0].reason == "the object is an interjection, not a value"


@pytest.mark.parametrize(("said_text", "names"), [("俺叫赵铁柱，在沈阳开出租。", ["赵铁柱"]), ("俺是刘小燕，在县城教书。", ["刘小燕"])])
def test_an_dialect_first_person_introduces_the_user(said_text, names):
    from memstack.layers.names import self_introduced

    assert self_introduced([user(said_text)], [], subjects=names) == names


@pytest.mark.parametrize(
    ("statement", "text", "kept"),
    [
        (st("User", "dead quiet", "Leeds"), "I run a little cafe in Leeds with my cousin. Winter is dead quiet.", False),
        (st("User", "afford", "rent"), "I've been tutoring on the side to cover the rent.", False),
        (st("User", "runs", "cafe in Leeds"), "I run a little cafe in Leeds with my cousin.", True),
        (st("User", "studies", "law"), "I'm studying law at night.", True),
        (st("User", "lives in", "Leeds"), "I'm based in Leeds these days.", True),  # a spelling of a known relation
        (st("User", "has", "a dog"), "We got a dog last spring.", True),  # a light verb: the object decides
        (st("User", "uses", "Vancouver"), "I used to live in Toronto, now I'm in Vancouver.", False),  # "used to" is a time
        (st("User", "uses", "Figma"), "I used to use Sketch, now I use Figma.", True),
        (st("User", "lives in", "Vancouver"), "I used to live in Toronto, now I'm in Vancouver.", True),
        (st("User", "uses", "Porto"), "Back from Santiago! 260 km from Porto in 14 days.", False),  # nothing says a use
        (st("User", "uses", "Postgres"), "We switched to Postgres last year.", True),
    ],
)
def test_an_english_predicate_must_be_said_in_the_sentence_of_its_object(statement, text, kept):
    got = verify([statement], [user(text)])
    assert bool(got.kept) == kept, got


def test_a_move_the_model_left_out_of_a_long_sentence_still_supersedes_the_old_place(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("用户", "人物", "住在", "昆明")), statements(("用户", "人物", "辞职", "旅行社"))],
    )
    said(
        mem,
        (["我住在昆明，在一家旅行社上班。", "好的"], T0),
        (["旅行社我已经辞了，后来去了杭州一家做跨境电商的公司，人也搬到杭州滨江区了，通勤近多了。", "恭喜"], T0 + timedelta(days=50)),
    )
    assert values(me(mem)["住在"]) == (["杭州滨江区"], ["昆明"])


@pytest.mark.parametrize(
    ("text", "moves"),
    [
        ("我先搬回宜昌找份工作。", [("搬回", "宜昌")]),
        ("I moved to Hoboken in March.", [("moved to", "Hoboken")]),
        ("我们搬去了一个新小区。", []),  # no place name: left to the model
        ("Work moved me to our Manchester office.", []),  # where one works, not lives
    ],
)
def test_the_moves_the_words_say(text, moves):
    from memstack.layers.moves import said_moves

    assert [(s.predicate, s.object) for s in said_moves([user(text)], "zh")] == moves


def test_a_planned_or_someone_elses_move_is_no_move_of_the_users(tmp_path):
    mem = memory(tmp_path, ["profile"], [statements(("用户", "人物", "住在", "昆明")), statements()])
    said(mem, (["我住在昆明。", "好的"], T0), (["我妹妹上个月搬到大理了，我打算明年搬到成都。", "好"], T0 + timedelta(days=50)))
    attributes = me(mem)
    assert values(attributes["住在"]) == (["昆明"], [])


def test_a_doubled_name_opening_a_sentence_is_its_subject():
    # how children and pets are called ("乐乐", "球球"); a doubled adverb is no one ("天天")
    got = verify([st("用户", "报了", "游泳班")], [user("乐乐暑假报了游泳班，天天吵着要去。")])
    assert not got.kept and got.rejected[0].reason == "the words say it of 乐乐"
    assert verify([st("用户", "加班", "公司")], [user("天天在公司加班，累死了。")]).kept


def test_a_predicate_that_holds_a_place_is_no_relation():
    # "后来去了长沙一家做智能家居的公司" gave "用户|去了长沙|智能家居": a clause, not an attribute
    said_text = [user("后来去了苏州一家做新能源的公司，住在园区。")]
    got = shape(st("用户", "去了苏州", "新能源"), said_text)
    assert isinstance(got, Rejected) and got.reason == "the predicate holds a place, not a relation"
    assert isinstance(shape(st("用户", "住在", "园区"), said_text), list)


def test_quitting_a_group_ends_what_we_did_in_it(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("User", "person", "plays", "bass"), ("User", "person", "rehearses on", "Sundays")), statements()],
    )
    said(
        mem,
        (["I play bass in a cover band, we rehearse on Sundays at a studio in Brooklyn.", "ok"], T0),
        (["I quit the band in July. I'm thinking about learning the cello.", "ok"], T0 + timedelta(days=140)),
    )
    attributes = me(mem)
    assert values(attributes["rehearses on"]) == ([], ["Sundays"])
    assert values(attributes["plays"]) == (["bass"], [])  # said in the band's clause, not of it: kept


@pytest.mark.parametrize(
    ("predicate", "obj", "text"),
    [
        # a noun phrase of the user's words is no relation of theirs: after an article or a
        # demonstrative, or a word that can never be a verb
        ("book club", "Tuesdays", "I quit the book club on Tuesdays, too many people who never read the book."),
        ("coach", "drills", "The new coach makes us do nothing but drills."),
        ("library", "two evenings a week", "finally sorted: library two evenings a week and the café on Saturdays."),
        ("legs feel", "fine", "Skipped the massage, the legs feel fine anyway."),
    ],
)
def test_a_noun_of_the_words_is_no_relation_of_the_users(predicate, obj, text):
    got = shape(st("User", predicate, obj), [user(text)])
    assert isinstance(got, Rejected) and got.reason == "the predicate is a noun of the user's words, not the subject's relation"


@pytest.mark.parametrize(
    ("predicate", "obj", "text"),
    [
        ("hobby", "pottery", "My hobby is pottery these days."),  # the user's own label
        ("cat", "Miso", "My cat Miso sleeps all day."),
        ("coaches", "under-12s", "I coach the under-12s on Saturdays."),  # a verb, said as one
        ("works at", "a garage", "I work at a garage in Bristol."),
        ("dog", "Pickle", "we adopted a greyhound called Pickle"),  # the phrase never said as such
    ],
)
def test_a_verb_or_the_users_own_label_stays(predicate, obj, text):
    assert isinstance(shape(st("User", predicate, obj), [user(text)]), list)


def test_a_time_of_day_or_how_something_went_is_no_value():
    said_text = [user("昨晚值班到十一点，回家倒头就睡，睡得特别香。")]
    got = shape(st("用户", "值班", "十一点"), said_text)
    assert isinstance(got, Rejected) and got.reason == "the object is a time of day, not a value"
    got = shape(st("用户", "睡得", "特别香"), said_text)
    assert isinstance(got, Rejected) and got.reason == "the predicate is a verb and how it went (得), not a relation"
    got = shape(st("User", "finished", "7 pm"), [user("finished the shift at 7 pm, knackered")])
    assert isinstance(got, Rejected) and got.reason == "the object is a time of day, not a value"
    # a time the predicate asks for stays: "after", "到", a time attribute
    assert isinstance(shape(st("User", "no coffee after", "3 pm"), [user("No coffee after 3 pm for me now.")]), list)
    assert isinstance(shape(st("用户", "起床时间", "六点半"), [user("我每天六点半起床。")]), list)
    assert isinstance(shape(st("用户", "觉得", "太累"), [user("我觉得太累了。")]), list)


@pytest.mark.parametrize(
    ("predicate", "obj", "text"),
    [
        # a noun the words say something of, the object that something: no relation of the user's
        ("腰", "疼死", "这几天腰都快疼死了，搬家搬的。"),
        ("客户", "骂到不行", "方案又被客户骂到不行，心累。"),
        ("球赛", "一场不落", "世界杯那阵子球赛一场不落，天天熬夜。"),
    ],
)
def test_the_topic_of_a_clause_is_no_relation(predicate, obj, text):
    got = shape(st("用户", predicate, obj), [user(text)])
    assert isinstance(got, Rejected) and got.reason == "the predicate is the topic of a clause, not a relation"


def test_a_noun_before_a_value_a_label_and_a_verb_stay():
    assert isinstance(shape(st("用户", "月薪", "两万"), [user("我现在月薪两万，还行吧。")]), list)
    assert isinstance(shape(st("用户", "爱好", "钓鱼"), [user("我爱好钓鱼，周末常去水库。")]), list)
    assert isinstance(shape(st("用户", "开发", "读书App"), [user("我正在开发读书App。")]), list)


def test_a_sentence_as_a_subject_and_a_frequency_as_a_predicate_are_no_statement():
    got = shape(st("I gave up on it", "t", "e"), [user("Honestly I gave up on it.")])
    assert isinstance(got, Rejected) and got.reason == "the subject is a clause, not a name"
    got = shape(st("Maria sold the van to a neighbour.", "max", "neighbour"), [user("Maria sold the van to a neighbour.")])
    assert isinstance(got, Rejected) and got.reason == "the subject is a clause, not a name"
    assert isinstance(
        shape(st("University of Cape Town", "located in", "Rondebosch"), [user("University of Cape Town is in Rondebosch")]), list
    )
    got = shape(st("用户", "天天", "加班"), [user("我们组天天加班。")])
    assert isinstance(got, Rejected) and got.reason == "the predicate is a time word, not a relation"
    # a duration is a value of what takes it ("通勤|二十分钟"), not a frequency
    assert isinstance(shape(st("用户", "骑车到公司", "二十分钟"), [user("我骑车到公司二十分钟。")]), list)


def test_an_object_that_holds_a_verbs_particle_is_a_verb_phrase():
    # "handed my notice in at the call centre" gave "User|handed|notice in at call centre"
    got = shape(st("User", "put", "my name down for the 10k"), [user("put my name down for the 10k in May")])
    assert isinstance(got, Rejected) and got.reason == "the object is a verb phrase, not a value"
    got = shape(st("User", "handed", "keys back to landlord"), [user("handed the keys back to the landlord yesterday")])
    assert isinstance(got, Rejected) and got.reason == "the object is a verb phrase, not a value"
    assert isinstance(shape(st("User", "works at", "Back to Basics Cafe"), [user("I work at Back to Basics Cafe")]), list)


def test_a_noun_phrase_before_the_verb_is_the_one_who_does_it():
    # "the new organiser only ever plays Catan" gave "User|plays|catan" (a new-user trial, stop 41)
    said_text = [user("I stopped going to the Tuesday run club, the new coach only ever does hill sprints.")]
    got = verify([st("User", "does", "hill sprints")], said_text)
    assert not got.kept and got.rejected[0].reason == "the words say it of the new coach"
    got = verify([st("User", "uses", "Trello")], [user("I write Go and the team uses Trello.")])
    assert not got.kept and got.rejected[0].reason == "the words say it of the team"
    assert verify([st("User", "writes", "Go")], [user("I write Go and the team uses Trello.")]).kept
    assert verify([st("User", "takes", "bus")], [user("I take the bus to work.")]).kept
    # "User|new organiser|plays": the noun phrase does the verb that is the object
    got = shape(st("User", "new coach", "does"), said_text)
    assert isinstance(got, Rejected) and got.reason == "the predicate is the topic of a clause, not a relation"


def test_what_the_user_is_follows_a_copula():
    said_text = [user("Big news: I moved to Lisbon in March and I'm now teaching at a language school. I'm a Pisces, I'm 41.")]
    for obj, reason in (("lisbon", "the words do not say it is"), ("teaching", "a verb in progress, not what the subject is")):
        got = shape(st("User", "is", obj), said_text)
        assert isinstance(got, Rejected) and got.reason == reason
    assert isinstance(shape(st("User", "is", "Pisces"), said_text), list)
    assert isinstance(shape(st("User", "is", "41"), said_text), list)


def test_a_move_the_model_named_under_another_predicate_is_still_added():
    from memstack.layers.moves import missed_moves

    said_text = [user("Quick one: I moved to Lisbon in March, loving it.")]
    assert [m.object for m in missed_moves([st("User", "is", "lisbon")], said_text, "en")] == ["Lisbon"]
    assert missed_moves([st("User", "lives in", "Lisbon")], said_text, "en") == []
    assert missed_moves([st("用户", "搬到", "里斯本")], [user("我三月搬到里斯本了。")], "zh") == []


def test_a_one_character_comment_on_a_topic_is_no_value():
    got = shape(st("用户", "腰", "疼"), [user("最近加班太多，腰也疼得不行。")])
    assert isinstance(got, Rejected) and got.reason == "the predicate is the topic of a clause, not a relation"


def test_a_supposition_inside_the_object_is_a_clause_and_yao_shi_is_no_copula():
    # "额想着要是生意一直好，明年把后院再加盖两间房" gave "用户|是|额想着要是生意一直好"
    said_text = [user("我想着要是行情一直好，年底把车也换了。")]
    got = verify([st("用户", "是", "我想着要是行情一直好")], said_text)
    assert not got.kept and got.rejected[0].reason == "the object is a clause, not a value"
    got = verify([st("用户", "是", "年底")], [user("要是顺利的话年底就能回来。")])
    assert not got.kept
    assert verify([st("用户", "是", "护士")], [user("我是护士，在儿童医院上班。")]).kept


def test_the_user_naming_one_of_their_people_is_their_relation():
    # "My wife Chen Yu joined me last week" gave user|wife|Chen Yu, dropped as said of "my wife"
    for text, pred, obj in (
        ("My husband Tomasz got a job offer in Gdansk, we'll see.", "husband", "Tomasz"),
        ("Ingrid is my sister, she lives in Bergen.", "sister", "Ingrid"),
        ("我表哥周凯下个月结婚。", "表哥", "周凯"),
        ("郭晓晴是我室友，我们合租三年了。", "室友", "郭晓晴"),
    ):
        subject = "User" if text.isascii() else "用户"
        assert verify([st(subject, pred, obj)], [user(text)]).kept, text
    # a value of the kin word's clause is no name, and another kin word is not the one said
    assert not verify([st("用户", "表哥", "下个月")], [user("我表哥周凯下个月结婚。")]).kept
    assert not verify([st("User", "husband", "Gdansk")], [user("My husband Tomasz got a job offer in Gdansk.")]).kept
    assert not verify([st("用户", "表弟", "周凯")], [user("我表哥周凯下个月结婚。")]).kept
    # a kin word relates the user to a person: never to a value of the sentence
    for pred, obj, text in (("女儿", "发愁", "我女儿要高考了，我天天都在发愁。"), ("娘", "港", "我娘天天港我要早点结婚。")):
        got = shape(st("用户", pred, obj), [user(text)])
        assert isinstance(got, Rejected) and got.reason == "a kin word relates to a person, not a value"


def test_a_pronoun_goes_to_the_one_person_named_before_it():
    # "…; she teaches piano at a music school" was dropped from the user, never given to the wife
    got = verify([st("User", "works as", "nurse")], [user("My husband Tomasz moved here in May, and he works as a nurse now.")])
    assert [(k.subject, k.object) for k in got.kept] == [("Tomasz", "nurse")]
    got = verify([st("User", "coaches", "volleyball")], [user("Went with my roommate to the gym; she coaches volleyball on Sundays.")])
    assert [(k.subject, k.object) for k in got.kept] == [("roommate", "volleyball")]
    got = verify([st("用户", "开", "奶茶店")], [user("我表哥周凯回老家了，他在镇上开了家奶茶店。")])
    assert [(k.subject, k.object) for k in got.kept] == [("周凯", "奶茶店")]
    # two people before the pronoun: no guess between them; a place is nobody
    assert not verify([st("用户", "钓了", "三条鲫鱼")], [user("周末我跟老周和小董去水库，他钓了三条鲫鱼。")]).kept
    assert not verify([st("User", "coaches", "volleyball")], [user("My roommate and Dr. Okafor came; she coaches volleyball.")]).kept
    got = verify([st("User", "coaches", "volleyball")], [user("I moved to Leeds with my roommate, she coaches volleyball.")])
    assert [(k.subject, k.object) for k in got.kept] == [("roommate", "volleyball")]


def test_what_someone_thinks_or_says_of_a_person_is_no_fact():
    # "my mom thinks I wasted my master's going to work in a factory" gave mom|wasted|master's…
    got = verify([st("mom", "wasted", "degree")], [user("my dad reckons I wasted my degree working in retail, whatever.")])
    assert not got.kept and got.rejected[0].reason == "the words report what someone thinks or says, not a fact"
    got = verify([st("用户", "结婚", "三十岁之前")], [user("我妈天天说我要三十岁之前结婚，烦死了。")])
    assert not got.kept
    # the user telling the assistant is no report of another's
    assert verify([st("用户", "搬到", "佛山")], [user("跟你说我上个月搬到佛山了。")]).kept


def test_an_object_that_is_a_verb_or_a_clause_with_a_pronoun_is_no_value():
    for pred, obj, text in (
        ("婚期", "改了", "婚期改了，改成明年五一了。"),
        ("搬到", "我这边来住", "她上个月搬到我这边来住了。"),
        ("工资少了一千", "工资少了一千", "我换岗了，就是工资少了一千。"),
    ):
        assert isinstance(shape(st("用户", pred, obj), [user(text)]), Rejected), obj
    assert isinstance(shape(st("用户", "住在", "我家楼下"), [user("她住在我家楼下。")]), list)  # no verb: a place


def test_lao_and_a_surname_is_someone_else_who_does_it():
    # "回来以后老周非要买个电动三轮带我去郊区玩，我没让" gave 用户|计划|去郊区玩 (jieba tags no 老周)
    text = "回来以后老孙非要买个电动三轮带我去郊区玩，我没让。"
    assert not verify([st("用户", "要", "买个电动三轮")], [user(text)]).kept
    assert verify([st("用户", "去", "钓鱼")], [user("周末我跟老孙去钓鱼。")]).kept  # with him: the user goes
    from memstack.layers.verify import _nicknames

    assert _nicknames("我腰有点小毛病，不碍事。") == []  # 小毛 of 小毛病 is nobody
    assert [n for _a, _b, n in _nicknames("回来以后老孙非要买个电动三轮")] == ["老孙"]


def test_dialect_pronouns_say_whose_it_is():
    # Cantonese 佢 is he or she, Shanghainese 阿拉 is I or we; Shaanxi 额 is I (not 额头, 金额)
    assert not verify([st("用户", "做", "会计")], [user("我家姐喺深圳做会计，佢话下个月转工。")]).kept
    assert not verify([st("用户", "参加", "辩论队")], [user("阿拉儿子现在参加学校的辩论队了。")]).kept
    got = verify([st("用户", "教", "钢琴")], [user("我家姐阿欣搬返广州喇，佢喺琴行教钢琴。")])
    assert [(k.subject, k.object) for k in got.kept] == [("阿欣", "钢琴")]
    from memstack.layers.verify import _SELF

    assert _SELF.search("额想着明年再加盖两间房") and not _SELF.search("额头磕破了，金额也不对")


def test_a_group_that_ended_ends_what_we_did_in_it_not_the_instrument(tmp_path):
    # "乐队也散伙了": the band's doings end as when the user quits it; the instrument played in it
    # is the user's own (see test_quitting_a_group_ends_what_we_did_in_it)
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("用户", "人物", "弹", "吉他"), ("用户", "人物", "演出", "酒吧")), statements()],
    )
    said(
        mem,
        (["我在一个乐队里弹吉他，我们经常去酒吧演出。", "好的"], T0),
        (["跟你说，我们乐队上个月解散了。", "可惜了"], T0 + timedelta(days=40)),
    )
    assert values(me(mem)["演出"]) == ([], ["酒吧"]) and values(me(mem)["弹"]) == (["吉他"], [])
    english = memory(tmp_path / "en", ["profile"], [statements(("User", "person", "rehearses on", "Fridays")), statements()])
    said(
        english,
        (["I play drums in a wedding band, we rehearse on Fridays.", "nice"], T0),
        (["The band split up in March, so no more gigs.", "sorry"], T0 + timedelta(days=40)),
    )
    assert values(me(english)["rehearses on"]) == ([], ["Fridays"])
    from memstack.types import Message as Msg

    assert not cessations([Msg(role="user", content="那家店倒闭了，婚事也黄了。")])  # no group: nothing ended


def test_a_pronoun_after_two_people_is_nobodys():
    # "周末跟老周和小何去千岛湖钓鱼，他钓了条五斤的鲢鱼" gave 钓=鲢鱼 to both
    text = "周六跟老孙和小董去水库，他钓了条三斤的草鱼。"
    assert not verify([st("老孙", "钓", "草鱼"), st("小董", "钓", "草鱼")], [user(text)]).kept
    assert verify([st("老孙", "钓", "草鱼")], [user("周六跟老孙去水库，他钓了条三斤的草鱼。")]).kept
    got = verify(
        [st("Ines", "teaches", "yoga"), st("Marta", "teaches", "yoga")], [user("Had lunch with Ines and Marta; she teaches yoga.")]
    )
    assert not got.kept


def test_a_copula_is_said_before_its_object():
    # "在杭州一家外贸公司做单证" gave 是=外贸公司: the 做 after the company was taken for its copula
    said_text = [user("我在苏州一家物流公司做调度。")]
    assert not verify([st("用户", "是", "物流公司")], said_text).kept
    assert verify([st("用户", "是", "调度")], said_text).kept


def test_a_verb_that_says_when_is_no_predicate():
    # fresh7: "退休前在公交公司卖票" was stored as 退休=公交公司, current
    words = [user("我退休前在纺织厂当会计，后来去了社区帮忙。")]
    assert not verify([st("用户", "退休", "纺织厂"), st("用户", "退休前", "纺织厂")], words).kept
    (kept,) = verify([st("用户", "工作单位", "纺织厂")], words).kept
    assert kept.past  # what was before an event that happened is past
    assert not verify([st("用户", "结婚", "西安")], [user("结婚以后我们住在西安。")]).kept
    moved = verify([st("用户", "住在", "绵阳")], [user("搬到成都之前我住在绵阳。")]).kept
    assert [s.past for s in moved] == [True]
    # a word that only starts with 前/后 is no time: "做前台", "后来"
    assert verify([st("用户", "做", "前台")], [user("我在酒店做前台。")]).kept
    assert verify([st("用户", "带", "孙子")], [user("我去年退休了，后来一直在家带孙子。")]).kept


def test_what_is_said_of_my_husband_is_the_husbands():
    # a trial: "我老公…" named him in Chinese, and "My husband is learning Japanese" given to him by
    # name was dropped: the words do not say the name
    words = [user("My husband is learning Japanese these days.")]
    got = verify([st("周建国", "is learning", "Japanese")], words, kin=[("老公", "周建国")])
    assert [(k.subject, k.object) for k in got.kept] == [("husband", "Japanese")]
    got = verify([st("林涛", "工作单位", "银行")], [user("我老公在银行上班。")], kin=[("丈夫", "林涛")])
    assert [(k.subject, k.object) for k in got.kept] == [("老公", "银行")]
    # two people the user called husband (a word in each language): no guess; nor for someone else
    assert not verify([st("周建国", "is learning", "Japanese")], words, kin=[("老公", "周建国"), ("丈夫", "林海")]).kept
    assert not verify([st("周建国", "is learning", "Japanese")], [user("My boss is learning Japanese.")], kin=[("老公", "周建国")]).kept
    # the user between the kin word and the object: the user's deed, or the user's gift
    assert not verify([st("林建华", "考", "公务员")], [user("我爸让我考公务员。")], kin=[("爸", "林建华")]).kept
    assert not verify([st("Tom", "bought", "bike")], [user("My husband bought me a bike.")], kin=[("husband", "Tom")]).kept
    # nor is the user's statement moved to the kin word: "我妈做的红烧肉我最爱吃" is no 妈|爱吃|红烧肉
    assert not verify([st("用户", "爱吃", "红烧肉")], [user("我妈做的红烧肉我最爱吃。")]).kept
    # the kin relation of a name jieba does not tag alone ("周建国": 周 and 建国)
    assert verify([st("用户", "老公", "周建国")], [user("我老公周建国是会计。")]).kept


def test_what_the_user_asks_the_assistant_for_is_no_fact():
    # "Kindly suggest some good weekend activity for kids" was stored as the user's
    for statement, text in (
        (st("User", "kindly suggest", "weekend activity"), "Kindly suggest some weekend activity for kids near Leeds."),
        (st("User", "recommend", "Python book"), "Can you recommend a good Python book?"),
        (st("用户", "推荐", "周末活动"), "请推荐几个适合孩子的周末活动。"),
        (st("用户", "查", "机票"), "能不能帮我查一下去三亚的机票"),
    ):
        got = verify([statement], [user(text)])
        assert not got.kept and got.rejected[0].reason == "the words ask the assistant for it, not a fact", text
    # the user's own recommendation, leave taken, a trip said: facts
    assert verify([st("User", "recommends", "ramen place")], [user("I recommend the ramen place near my office.")]).kept
    assert verify([st("用户", "请了", "三天假")], [user("我请了三天假。")]).kept
    assert verify([st("用户", "去", "三亚")], [user("能不能帮我查一下机票？我下个月去三亚。")]).kept


def test_a_name_is_no_predicate():
    # "I am having two kids, Aditya who is in 5th std" gave User|Aditya|5th std
    words = [user("I have two kids, Ravi who is in 4th grade and Asha who is in 1st grade. 我女儿小雨上三年级。")]
    for statement in (st("User", "Ravi", "4th grade"), st("User", "Asha", "1st grade"), st("用户", "小雨", "三年级")):
        got = shape(statement, words)
        assert isinstance(got, Rejected) and got.reason == "the predicate is a name, not a relation"
    assert not isinstance(shape(st("用户", "游泳时间", "每天"), words), Rejected)  # a surname's character opens a word
    assert not isinstance(shape(st("User", "sister", "Asha"), words), Rejected)  # a kin word relates


def test_a_space_between_chinese_words_is_a_comma_of_chat():
    # voice input and chat write no commas ("…总监Cindy 以前是老罗"): the space ends a clause
    got = verify([st("用户", "汇报给", "老周")], [user("累死了 需求又改了 我现在汇报给新来的总监Vivian 以前是老周")])
    assert not got.kept  # not a current value: 以前 opens its own clause
    assert verify([st("用户", "工作", "Google")], [user("我用 Python 写爬虫，在 Google 工作。")]).kept  # spaced on both sides
    # a service's identifier is a subject the words speak of
    got = verify([st("用户", "数据库", "PostgreSQL")], [user("补充一下，payment-service用的是Go，数据库PostgreSQL。")])
    assert [(k.subject, k.object) for k in got.kept] == [("payment-service", "PostgreSQL")]
    got = verify([st("用户", "数据库", "PostgreSQL")], [user("补充一下 payment-service用的是Go 数据库PostgreSQL")])
    assert not got.kept and got.rejected[0].reason == "the words say it of payment-service"


def test_traditional_characters_are_read_as_simplified_ones(tmp_path):
    # a 台北 user: "我又換工作了" was not read as a change (換, 現在), the old job stayed current
    mem = memory(
        tmp_path,
        ["profile"],
        [statements(("用户", "人物", "职位", "行銷專員")), statements(("用户", "人物", "职位", "產品經理"))],
    )
    said(
        mem,
        (["我在一家電商公司當行銷專員，公司在內湖。", "好的"], T0),
        (["我又換工作了，現在當產品經理，不再做行銷了。", "恭喜"], T0 + timedelta(days=60)),
    )
    assert values(me(mem)["职业"]) == (["產品經理"], ["行銷專員"])
    assert change_cue("我又換工作了，現在當產品經理") and change_cue("我又换工作了，现在当产品经理")
    got = verify([st("用户", "住在", "板橋")], [user("我以前住在板橋，現在住汐止。")])
    assert got.kept and got.kept[0].past  # 以前 read in either script


# ---- a change of job or home said without its new value ------------------------------------------


@pytest.mark.parametrize(
    ("sentence", "kinds"),
    [
        ("我又换工作了，这次离家近多了。", ["job"]),
        ("上个月辞职了，先休息一阵。", ["job"]),
        ("I changed jobs in March, the commute is shorter.", ["job"]),
        ("My new job starts at nine.", ["job"]),
        ("我们搬家了，离地铁站更近。", ["home"]),
        ("We've moved, the new place has a garden.", ["home"]),
        ("We shifted last month, the flat is bigger.", ["home"]),
        # a plan, a wish, a question, a denial, someone else: no change of the user's
        ("我打算明年换工作。", []),
        ("要不要换工作？", []),
        ("没换工作，还在原来那家。", []),
        ("我老公换工作了。", []),
        ("I need a new job.", []),
        ("I'm thinking about changing jobs.", []),
        ("We moved on from that idea.", []),
        ("I moved the meeting to Friday.", []),
        ("我妈搬家了。", []),
    ],
)
def test_a_change_of_job_or_home_is_read_from_the_users_words(sentence, kinds):
    from memstack.layers.switched import switches

    assert [s.kind for s in switches([user(sentence)])] == kinds


def test_a_job_change_said_without_the_new_job_ends_the_old_job_and_salary(tmp_path):
    mem = memory(
        tmp_path,
        ["profile", "graph"],
        [
            statements(("用户", "人物", "职位", "客户经理"), ("用户", "人物", "月薪", "一万二"), ("用户", "人物", "住在", "河西")),
            statements(),
        ],
    )
    said(
        mem,
        (["我在银行做客户经理，月薪一万二，住在河西。", "好的"], T0),
        (["我又换工作了，这次去了一家券商，每天都很忙。", "辛苦了"], T0 + timedelta(days=90)),
    )
    attributes = me(mem)
    assert values(attributes["职业"]) == ([], ["客户经理"])  # (职位 is stored as 职业)
    assert values(attributes["月薪"]) == ([], ["一万二"])
    assert values(attributes["住在"]) == (["河西"], [])  # a job change is no move


def test_a_move_said_without_the_new_place_ends_the_old_one_and_the_new_value_said_with_it_stays(tmp_path):
    mem = memory(
        tmp_path,
        ["profile"],
        [
            statements(("User", "person", "lives in", "Leeds"), ("User", "person", "works at", "a bakery")),
            statements(("User", "person", "works at", "a bookshop")),
        ],
    )
    said(
        mem,
        (["I live in Leeds and I work at a bakery.", "ok"], T0),
        (["We've moved, the new place has a garden. I changed jobs too: I work at a bookshop now.", "nice"], T0 + timedelta(days=60)),
    )
    attributes = me(mem)
    assert values(attributes["lives in"]) == ([], ["Leeds"])
    assert values(attributes["works at"]) == (["a bookshop"], ["a bakery"])


@pytest.mark.parametrize(
    ("statement", "text", "kept"),
    [
        # undecided: no fact and no plan
        (st("用户", "纠结", "两款车"), "我在两款车之间纠结，预算十五万。", False),
        (st("用户", "计划", "成都还没想好要不要去"), "先去重庆，成都还没想好要不要去。", False),
        (st("用户", "去", "成都"), "先去重庆，我还在想要不要去成都。", False),
        (st("User", "is", "torn between two flats"), "I'm torn between two flats in Leith.", False),
        (st("用户", "去", "重庆"), "先去重庆，成都还没想好要不要去。", True),
        # a request to the assistant
        (st("用户", "计划", "减脂食谱"), "帮我做个减脂食谱吧。", False),
        (st("用户", "需要", "行程"), "你帮我排一个三天的行程。", False),
        (st("用户", "做", "晚饭"), "我老公上班，平时我帮他做晚饭。", True),
        # a preposition is no relation
        (st("User", "under", "two hours"), "I ran it under two hours.", False),
        (st("User", "after", "lunch"), "I swim after lunch.", False),
    ],
)
def test_what_is_undecided_asked_for_or_only_a_preposition_is_dropped(statement, text, kept):
    got = verify([statement], [user(text)])
    assert bool(got.kept) is kept, got


@pytest.mark.parametrize(
    ("statement", "text", "kept"),
    [
        # a plan whose doer is someone else is not the user's plan
        (st("用户", "计划", "成都分公司"), "领导打算下个月调我去成都分公司。", False),
        (st("User", "plans to move to", "Boston"), "My company wants to move me to Boston next year.", False),
        (st("用户", "计划", "学钢琴"), "明年我打算学钢琴。", True),
        (st("用户", "计划", "学钢琴"), "过完年打算学钢琴。", True),
        (st("用户", "计划", "去厦门"), "我和老婆打算国庆去厦门。", True),
        # a plan the next clause says is undecided ("…，还在犹豫要不要去")
        (st("用户", "计划", "换一辆电车"), "我打算换一辆电车，不过还没想好要不要换。", False),
        (st("用户", "计划", "换一辆电车"), "我打算换一辆电车，还想问问你哪款好。", True),
        # the subject said after the object is no subject of it ("准备调剂去南大": 南大 does not 调剂)
        (st("南大", "计划", "调剂"), "小周差了两分，打算调剂去南大。", False),
        (st("订单服务", "使用", "Kafka"), "订单服务使用Kafka。", True),
        # an object said as the topic with "我" after it is the user's ("蛋糕我打算自己烤")
        (st("老公", "计划", "蛋糕"), "我老公负责买菜。蛋糕我打算自己烤。", False),
        # a word said inside a noun phrase ("the coffee shop") is no verb of the user's
        (st("User", "shop", "customer support"), "I left the coffee shop, now I do customer support.", False),
        (st("User", "shop at", "Aldi"), "I shop at Aldi every week.", True),
    ],
)
def test_whose_plan_it_is_and_who_does_it_follow_the_words(statement, text, kept):
    got = verify([statement], [user(text)])
    assert bool(got.kept) is kept, got


def test_a_kin_word_and_a_name_written_as_a_predicate_is_the_relation_said():
    # "我妹妹陈晨在上海读研" gave 陈静|妹妹陈晨|上海: the user's relation to 陈晨 is what the words say
    got = verify([st("用户", "妹妹周雪", "杭州")], [user("我妹妹周雪在杭州读大学，学的是法律。")])
    assert [(k.subject, k.predicate, k.object) for k in got.kept] == [("用户", "妹妹", "周雪")]
    got = verify([st("User", "sister Anna", "Leeds")], [user("My sister Anna studies law in Leeds.")])
    assert [(k.subject, k.predicate, k.object) for k in got.kept] == [("User", "sister", "Anna")]
    # unless the words do not say it of the user
    assert not verify([st("用户", "妹妹周雪", "杭州")], [user("老王的妹妹周雪在杭州读大学。")]).kept


@pytest.mark.parametrize(
    ("statement", "text", "kept"),
    [
        # a piece of a longer word is no value
        (st("用户", "计划", "寿面"), "长寿面肯定要有，蛋糕我来订。", False),
        (st("用户", "要", "长寿面"), "长寿面肯定要有，蛋糕我来订。", True),
        (st("用户", "做", "产品经理"), "我在腾讯做产品经理。", True),
        # an English object that only says when or how long
        (st("User", "is vegetarian", "for about six years"), "I've been vegetarian for about six years.", False),
        (st("User", "thinking about marathon", "October"), "Thinking about the Chicago marathon in October.", False),
        (st("User", "moved to", "Denver"), "We moved to Denver last year.", True),
    ],
)
def test_a_piece_of_a_word_or_a_time_is_no_value(statement, text, kept):
    got = verify([statement], [user(text)])
    assert bool(got.kept) is kept, got


def test_a_name_before_a_noun_is_no_value_and_a_plan_word_is_not_said_twice():
    text = "Thinking about the Chicago marathon in October. We moved to Chicago last year."
    assert not verify([st("User", "think", "Chicago")], [user("Thinking about the Chicago marathon in October.")]).kept
    assert verify([st("User", "moved to", "Chicago")], [user(text)]).kept  # said as the value once
    got = verify([st("User", "think", "marathon")], [user("Thinking about a marathon in the spring.")])
    assert [k.predicate for k in got.kept] == ["thinking about"]


def test_when_a_thing_was_done_is_its_value_but_not_how_long_nor_when_a_plan_is():
    assert verify([st("User", "quit smoking", "March")], [user("I quit smoking in March, it was hard.")]).kept
    assert not verify([st("User", "plans to visit", "March")], [user("I plan to visit Oslo in March.")]).kept
    assert not verify([st("User", "has lived in Oslo", "six years")], [user("I have lived in Oslo for six years.")]).kept


@pytest.mark.parametrize(
    ("statement", "text", "kept"),
    [
        # a name said before the verb with "跟我" between is the one who does it, to the user
        (st("用户", "求婚", "刘洋"), "好消息，刘洋上周跟我求婚了！", False),
        (st("用户", "表白", "小林"), "小林昨天向我表白了。", False),
        (st("用户", "求婚", "刘洋"), "我上周跟刘洋求婚了，他答应了！", True),
        # a time is no subject
        (st("下周三", "参加", "面试"), "下周三去杭州参加面试。", False),
        # a name said lower-case by the model, as a modifier in one sentence and a value in another
        (st("User", "thinking about", "boston"), "I live in Boston now. Thinking about the Boston marathon.", False),
        (st("User", "live in", "boston"), "I live in Boston now. Thinking about the Boston marathon.", True),
    ],
)
def test_who_does_it_and_a_name_before_a_noun_follow_each_sentence(statement, text, kept):
    got = verify([statement], [user(text)])
    assert bool(got.kept) is kept, got


def test_a_thing_of_someones_is_no_predicate():
    assert not verify([st("王老师", "网课", "有用")], [user("王老师的网课真的有用，我推荐给同学了。")]).kept
    assert verify([st("用户", "职业", "护士")], [user("我的职业是护士。")]).kept


def test_when_a_plan_is_and_a_distance_are_no_values():
    assert not verify([st("User", "marathon", "October")], [user("Thinking about the Chicago marathon in October.")]).kept
    assert not verify([st("用户", "跑了", "十二万公里")], [user("现在开的是一辆老帕萨特，跑了十二万公里。")]).kept


def test_a_cessation_said_after_its_object_ends_the_objects_own_verb():
    got = verify([st("用户", "戒了", "奶茶")], [user("我以前每天喝一杯奶茶，去年戒了，现在只喝白水。")])
    assert [(k.predicate, k.object, k.past) for k in got.kept] == [("喝", "奶茶", True)]
    # a cessation with its own object ends that one, not this
    assert not verify([st("用户", "戒了", "奶茶")], [user("我每天喝一杯奶茶，去年戒了烟。")]).kept
