"""What retrieval returns, on the real local embedder: a first-person question finds what the user
said of themself; a short conversation does not come back whole for every question; a question
about now ranks the later of two conflicting rounds first."""

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


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Memory(tmp_path_factory.mktemp("rel") / "m.db", layers=["retrieval"])
    m.add({"role": "user", "content": "我叫王五，我在杭州做前端开发"}, user_id="wangwu", thread_id="t", at=T0)
    m.add([{"role": "user", "content": "我叫王五，我在杭州做前端开发"}, {"role": "assistant", "content": "好的，我记住了。"}], user_id="wangwu2", thread_id="t", at=T0)
    for i, (said, reply) in enumerate(ROUNDS):
        m.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="short", thread_id="t", at=T0 + timedelta(minutes=i))
    moves = [
        (datetime(2026, 2, 1, tzinfo=TZ), "我在一家互联网公司做产品经理", "产品经理很锻炼人。"),
        (datetime(2026, 3, 1, tzinfo=TZ), "我住在上海", "上海是个很繁华的城市。"),
        (datetime(2026, 3, 10, tzinfo=TZ), "我周末喜欢去爬山", "爬山对身体很好。"),
        (datetime(2026, 4, 2, tzinfo=TZ), "我养了一只狗叫旺财", "旺财这个名字很可爱。"),
        (datetime(2026, 5, 1, tzinfo=TZ), "我已经从上海搬到深圳了", "深圳气候温暖，祝你适应新生活。"),
        (datetime(2026, 5, 9, tzinfo=TZ), "最近在学做饭", "做饭是很好的生活技能。"),
    ]
    for at, said, reply in moves:
        m.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="mover", thread_id=f"m{at.month}", at=at)
    m.flush()
    yield m
    m.close()


@pytest.mark.parametrize("user", ["wangwu", "wangwu2"])
@pytest.mark.parametrize("question", ["我在哪个城市？", "我住在哪里？", "我在哪个城市工作？"])
def test_a_first_person_question_finds_what_the_user_said_of_themself(mem, user, question):
    hits = mem.search(question, user_id=user, at=T0 + timedelta(days=1))
    assert hits and "杭州" in hits[0].unit.text


@pytest.mark.parametrize("question", ["量子纠缠的基本原理是什么？", "What is the capital of Australia?", "我喜欢什么运动？", "推荐一部电影"])
def test_an_unrelated_question_still_finds_nothing(mem, question):
    assert mem.search(question, user_id="wangwu", at=T0 + timedelta(days=1)) == []


@pytest.mark.parametrize(
    ("question", "answer"),
    [("我的猫叫什么名字？", "咪咪"), ("我用什么电脑？", "MacBook"), ("我叫什么？", "王五"), ("我下周去哪里？", "北京"), ("我住在哪里？", "杭州"), ("我在学什么乐器？", "吉他")],
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


def test_the_question_classifiers():
    from memstack.retrieval.search import asks_about_now, first_person

    assert first_person("我在哪个城市？") and first_person("Where do I live?") and first_person("what's my job")
    assert not first_person("What is the capital of Australia?") and not first_person("量子纠缠是什么？")
    assert asks_about_now("我现在住在哪里？") and asks_about_now("Do I still play tennis?") and asks_about_now("目前用什么数据库")
    assert not asks_about_now("我以前住在哪里？") and not asks_about_now("Where did I live in 2020?")
