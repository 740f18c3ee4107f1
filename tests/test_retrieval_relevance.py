"""What retrieval returns, on the real local embedder: a first-person question finds what the user
said of themself; a short conversation does not come back whole for every question; a question
about now ranks the later of two conflicting rounds first; a round in which the user only asked
(and the assistant answered, maybe wrongly) does not stand in for what the user said."""

from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 9, 1, 20, 0, tzinfo=TZ)

ROUNDS = [
    ("我叫王五，我在杭州做前端开发", "你好王五！前端开发很有意思。"),
    ("我养了一只猫叫咪咪", "咪咪这个名字真可爱。"),
    ("周末我去爬了黄山", "黄山风景很美，累不累？"),
    ("我最近在学吉他", "学吉他要多练习和弦。"),
    ("我喜欢吃川菜，特别是水煮鱼", "水煮鱼又麻又辣，很过瘾。"),
    ("我女朋友下个月过生日，我想送她一条项链", "项链是不错的礼物，可以选她喜欢的款式。"),
    ("我的电脑是MacBook Pro", "MacBook Pro很适合开发。"),
    ("我每天早上跑步五公里", "坚持跑步对身体很好。"),
    ("我正在读《三体》", "《三体》是很精彩的科幻小说。"),
    ("我下周要去北京出差", "出差注意休息，北京最近降温了。"),
]


#: a self-introduction and an update, each answered at length (as a chat model does): the user's
#: words are a small part of each round
LONG_REPLIES = [
    (
        datetime(2026, 11, 1, 10, tzinfo=TZ),
        "你好，我叫陈思，在上海做后端开发，主要用Java。",
        "你好陈思！很高兴认识你。在上海做后端开发是很棒的选择，上海的互联网和金融科技公司很多，Java生态在企业级开发中也非常成熟。"
        "Spring Boot、Spring Cloud、MyBatis这些框架你应该都很熟悉吧？如果你在工作中遇到性能调优、JVM参数、微服务拆分或者数据库设计方面的问题，"
        "都可以随时来问我。另外，如果你想了解一些新的技术方向，比如云原生、Kubernetes或者服务网格，我也可以给你介绍。平时工作忙不忙？有没有什么正在做的项目想聊聊？",
    ),
    (
        datetime(2026, 11, 20, 10, tzinfo=TZ),
        "跟你说一下，我已经从上海搬到深圳了，后端也全部改用Go了。",
        "恭喜你搬到深圳！深圳的科技氛围非常浓厚，腾讯、华为、大疆等公司都在那里，机会很多。从Java转到Go也是一个很有意思的变化：Go的并发模型基于goroutine和channel，"
        "编译速度快，部署简单，特别适合写微服务和云原生应用。刚开始你可能会不太习惯Go的错误处理方式和没有继承的接口设计，但熟悉之后会觉得很简洁。"
        "推荐你看看《Go语言圣经》，以及Gin、Echo这些Web框架，还有GORM做数据库访问。迁移过程中有什么问题都可以问我，比如怎么把Spring的依赖注入思路迁移到Go里。",
    ),
]
#: later, the user asked, and the assistant answered from the old facts
ASKED = [
    (datetime(2026, 11, 25, 10, tzinfo=TZ), "我现在住在哪个城市？", "根据你之前告诉我的信息，你住在上海，在那里做后端开发。"),
    (datetime(2026, 11, 25, 10, 5, tzinfo=TZ), "What language does my backend use now?", "Your backend uses Java."),
]
LATER = datetime(2026, 11, 28, 10, tzinfo=TZ)


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Memory(tmp_path_factory.mktemp("rel") / "m.db", layers=["retrieval"])
    m.add({"role": "user", "content": "我叫王五，我在杭州做前端开发"}, user_id="wangwu", thread_id="t", at=T0)
    m.add(
        [{"role": "user", "content": "我叫王五，我在杭州做前端开发"}, {"role": "assistant", "content": "好的，我记住了。"}],
        user_id="wangwu2",
        thread_id="t",
        at=T0,
    )
    for i, (said, reply) in enumerate(ROUNDS):
        m.add(
            [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
            user_id="short",
            thread_id="t",
            at=T0 + timedelta(minutes=i),
        )
    moves = [
        (datetime(2026, 2, 1, tzinfo=TZ), "我在一家互联网公司做产品经理", "产品经理很锻炼人。"),
        (datetime(2026, 3, 1, tzinfo=TZ), "我住在上海", "上海是个很繁华的城市。"),
        (datetime(2026, 3, 10, tzinfo=TZ), "我周末喜欢去爬山", "爬山对身体很好。"),
        (datetime(2026, 4, 2, tzinfo=TZ), "我养了一只狗叫旺财", "旺财这个名字很可爱。"),
        (datetime(2026, 5, 1, tzinfo=TZ), "我已经从上海搬到深圳了", "深圳气候温暖，祝你适应新生活。"),
        (datetime(2026, 5, 9, tzinfo=TZ), "最近在学做饭", "做饭是很好的生活技能。"),
    ]
    for at, said, reply in moves:
        m.add(
            [{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="mover", thread_id=f"m{at.month}", at=at
        )
    for user, asked in (("chensi", ()), ("chensi-asked", ASKED)):
        for n, (at, said, reply) in enumerate([*LONG_REPLIES, *asked]):
            m.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id=user, thread_id=f"s{n}", at=at)
    m.flush()
    yield m
    m.close()


@pytest.mark.parametrize("user", ["wangwu", "wangwu2"])
@pytest.mark.parametrize("question", ["我在哪个城市？", "我住在哪里？", "我在哪个城市工作？"])
def test_a_first_person_question_finds_what_the_user_said_of_themself(mem, user, question):
    hits = mem.search(question, user_id=user, at=T0 + timedelta(days=1))
    assert hits and "杭州" in hits[0].unit.text


@pytest.mark.parametrize(
    "question", ["量子纠缠的基本原理是什么？", "What is the capital of Australia?", "我喜欢什么运动？", "推荐一部电影"]
)
def test_an_unrelated_question_still_finds_nothing(mem, question):
    assert mem.search(question, user_id="wangwu", at=T0 + timedelta(days=1)) == []


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("我的猫叫什么名字？", "咪咪"),
        ("我用什么电脑？", "MacBook"),
        ("我叫什么？", "王五"),
        ("我下周去哪里？", "北京"),
        ("我住在哪里？", "杭州"),
        ("我在学什么乐器？", "吉他"),
    ],
)
def test_a_short_conversation_does_not_come_back_whole(mem, question, answer):
    hits = mem.search(question, user_id="short", at=T0 + timedelta(days=1))
    assert any(answer in h.unit.text for h in hits[:2])
    assert len(hits) <= 4, [h.unit.text.splitlines()[0] for h in hits]


def test_a_question_about_now_ranks_the_later_of_two_conflicting_rounds_first(mem):
    at = datetime(2026, 6, 1, tzinfo=TZ)
    now = mem.search("我现在住在哪里？", user_id="mover", at=at)
    assert "深圳" in now[0].unit.text and now[0].unit.timestamp.date().isoformat() == "2026-05-01"
    assert any("我住在上海" in h.unit.text for h in now)  # the old value is still there, as past
    current = mem.search("我目前在哪个城市？", user_id="mover", at=at)
    assert "深圳" in current[0].unit.text
    ctx = mem.context(user_id="mover", thread_id="new", query="我现在住在哪里？", at=at)
    memory = "\n".join(m.text for m in ctx.messages if m.role == "system")
    assert "[2026-05-01" in memory and "[2026-03-01" in memory


def test_a_question_not_about_now_keeps_the_best_match_first(mem):
    hits = mem.search("我住在哪里？", user_id="mover", at=datetime(2026, 6, 1, tzinfo=TZ))
    assert "我住在上海" in hits[0].unit.text


def test_a_first_person_question_finds_both_rounds_the_user_said_of_themself_despite_long_replies(mem):
    hits = mem.search("我住在哪里？", user_id="chensi", at=LATER)
    assert any("搬到深圳" in h.unit.text for h in hits) and any("在上海做后端开发" in h.unit.text for h in hits)


@pytest.mark.parametrize("question", ["我现在住在哪个城市？", "What language does my backend use now?", "我的后端现在用什么语言？"])
def test_what_the_user_said_outranks_the_assistants_earlier_answer_to_the_same_question(mem, question):
    hits = mem.search(question, user_id="chensi-asked", at=LATER)
    assert hits and "搬到深圳" in hits[0].unit.text, [h.unit.text.splitlines()[0] for h in hits]


def test_a_round_in_which_the_user_only_asked_is_still_found(mem):
    hits = mem.search("我住在哪里？", user_id="chensi-asked", at=LATER)
    assert any("搬到深圳" in h.unit.text for h in hits)
    assert any("根据你之前告诉我的信息" in h.unit.text for h in hits)


def memory_of(ctx) -> str:
    return "\n".join(m.text for m in ctx.messages if m.role == "system")


@pytest.mark.parametrize("question", ["我住在哪里？", "What language does my backend use now?"])
def test_the_context_leaves_out_the_users_earlier_question_and_the_answer_drawn_from_memory(mem, question):
    shown = memory_of(mem.context(user_id="chensi-asked", thread_id="new", query=question, at=LATER))
    assert "搬到深圳" in shown
    assert "我现在住在哪个城市？" not in shown and "What language does my backend use now?" not in shown
    assert "你住在上海" not in shown and "Your backend uses Java" not in shown


def test_a_question_about_what_the_assistant_said_sees_its_answers(mem):
    shown = memory_of(mem.context(user_id="chensi-asked", thread_id="new", query="你之前说我住在哪个城市？", at=LATER))
    assert "你住在上海" in shown


def test_which_rounds_are_only_asked():
    from memstack.retrieval.asked import asked_only
    from memstack.retrieval.units import units_for_round
    from memstack.tokens import get_counter
    from memstack.types import Message, Scope

    def unit(*turns, previous=()):
        messages = [Message(role=r, content=c, id=f"m{i}", seq=i, timestamp=T0, name=n) for i, (r, c, n) in enumerate(turns)]
        return units_for_round(Scope(user_id="u", thread_id="t"), messages, 1, get_counter("cl100k_base"), previous=previous)[0]

    assert asked_only(unit(("user", "我现在住在哪个城市？", None), ("assistant", "你住在上海。", None)))
    assert asked_only(unit(("user", "Where do I live? And what do I do?", None), ("assistant", "In Paris; you paint.", None)))
    assert not asked_only(unit(("user", "我搬到深圳了。你觉得深圳怎么样？", None), ("assistant", "深圳很好。", None)))
    # a statement ending in a question says things: 《百年孤独》 is what the user read
    assert not asked_only(
        unit(
            ("user", "嗨，今天我在图书馆里学习的时候发现了一本非常好看的小说，叫《百年孤独》，你听说过吗？", None),
            ("assistant", "当然听说过。", None),
        )
    )
    assert not asked_only(unit(("user", "我现在住在哪个城市？", None)))  # no answer
    assert asked_only(unit(("user", "对了，我住在哪？", None), ("assistant", "你住在上海。", None)))  # a lead word only
    # a clause that says something before the question: the user told a fact
    assert not asked_only(unit(("user", "我很喜欢旅游和看电影，你呢？", None), ("assistant", "我也喜欢。", None)))
    assert not asked_only(unit(("user", "比赛那天早上六点半就起跑，我得几点起床啊？", None), ("assistant", "五点吧。", None)))
    assert not asked_only(unit(("user", "How is your dog?", "Caroline"), ("assistant", "He is fine, thanks!", "Melanie")))  # between people
    before = [Message(role="assistant", content="我记得你说过你住在上海。", id="p", seq=0, timestamp=T0)]
    assert asked_only(unit(("user", "真的吗？", None), ("assistant", "是的。", None), previous=before))  # the lead-in is context


def test_the_question_classifiers():
    from memstack.retrieval.search import asks_about_now, first_person

    assert first_person("我在哪个城市？") and first_person("Where do I live?") and first_person("what's my job")
    assert not first_person("What is the capital of Australia?") and not first_person("量子纠缠是什么？")
    assert asks_about_now("我现在住在哪里？") and asks_about_now("Do I still play tennis?") and asks_about_now("目前用什么数据库")
    assert not asks_about_now("我以前住在哪里？") and not asks_about_now("Where did I live in 2020?")


def test_a_round_asking_for_advice_keeps_the_advice_and_one_asking_about_the_user_is_left_out(tmp_path):
    """The answer to "我该怎么办？" is the assistant's own advice, not drawn from memory: it stays in
    the context; the answer to "我住在哪个城市？" could only come from memory (or be wrong)."""
    m = Memory(tmp_path / "m.db", layers=["retrieval"])
    rounds = [
        ("我的膝盖跑步以后有点疼，我下个月还要跑半马。", "膝盖疼要重视，先休息几天，冰敷，疼痛消退后再慢慢恢复跑量。"),
        ("那我现在该怎么办？", "建议你这周先停跑，做一些臀桥和靠墙静蹲来加强膝盖周围的肌肉，两周后再试着慢跑五公里。"),
        ("我现在住在哪个城市？", "根据你之前说的，你住在杭州。"),
    ]
    for i, (said, reply) in enumerate(rounds):
        m.add(
            [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
            user_id="runner",
            thread_id=f"t{i}",
            at=T0 + timedelta(days=i),
        )
    m.flush()
    later = T0 + timedelta(days=10)
    shown = memory_of(m.context(user_id="runner", thread_id="new", query="膝盖疼的时候要做什么训练？", at=later))
    assert "臀桥" in shown and "那我现在该怎么办？" in shown
    shown = memory_of(m.context(user_id="runner", thread_id="new", query="我住在哪个城市？", at=later))
    assert "你住在杭州" not in shown and "我现在住在哪个城市？" not in shown
    m.close()


# ---- across languages: the question in one language, the memory in the other ----------------------

ENGLISH = [
    (
        datetime(2026, 3, 2, 9, tzinfo=TZ),
        "I'm Sarah Chen. I live in Boston and work as a nurse at Mass General.",
        "Nice to meet you, Sarah!",
    ),
    (datetime(2026, 4, 6, 9, tzinfo=TZ), "My son Leo is 8 and plays soccer on Saturdays.", "Fun! Does he play in a local league?"),
    (datetime(2026, 6, 14, 9, tzinfo=TZ), "I moved to Denver last month.", "Big change! How are you finding the altitude?"),
]


@pytest.fixture(scope="module")
def english(mem):
    for n, (at, said, reply) in enumerate(ENGLISH):
        mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="sarah", thread_id=f"e{n}", at=at)
    mem.flush()
    return mem


@pytest.mark.parametrize(
    ("question", "user", "answer"),
    [
        ("What is my name?", "wangwu", "王五"),
        ("Which city do I work in?", "wangwu2", "杭州"),
        ("What is my cat called?", "short", "咪咪"),
        ("Which book am I reading?", "short", "三体"),
    ],
)
def test_an_english_question_finds_what_was_said_in_chinese(mem, question, user, answer):
    hits = mem.search(question, user_id=user, at=T0 + timedelta(days=1))
    assert any(answer in h.unit.text for h in hits[:2]), [h.unit.text.splitlines()[0] for h in hits]


def test_an_english_question_about_now_finds_the_chinese_update_first(mem):
    hits = mem.search("Which city do I live in now?", user_id="mover", at=datetime(2026, 5, 20, tzinfo=TZ))
    assert hits and "深圳" in hits[0].unit.text, [h.unit.text.splitlines()[0] for h in hits]


@pytest.mark.parametrize(
    ("question", "answer"), [("我叫什么名字？", "Sarah"), ("我儿子几岁了？", "Leo"), ("我现在住在哪个城市？", "Denver")]
)
def test_a_chinese_question_finds_what_was_said_in_english(english, question, answer):
    hits = english.search(question, user_id="sarah", at=datetime(2026, 6, 20, tzinfo=TZ))
    assert hits and answer in hits[0].unit.text, [h.unit.text.splitlines()[0] for h in hits]


@pytest.mark.parametrize("question", ["What is the capital of Australia?", "Explain quantum entanglement.", "Write a haiku about autumn."])
def test_an_unrelated_question_in_the_other_language_still_finds_nothing(mem, question):
    assert mem.search(question, user_id="short", at=T0 + timedelta(days=1)) == []
