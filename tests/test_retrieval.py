"""Retrieval memory end to end on the real local embedder and the SQLite default: the articles'
examples, write-back through the job queue, isolation, deletion, and the search command."""

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from memstack import Memory
from memstack.errors import MemstackError
from memstack.layers.base import WriteRequest
from memstack.layers.retrieval import Retrieval
from memstack.profile import ProfileMismatch
from memstack.types import Message, SearchFilter

T0 = datetime(2026, 9, 1, 20, 0, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    m = Memory(tmp_path_factory.mktemp("r") / "m.db", layers=["window", "retrieval"])
    yield m
    m.close()


def save(mem, user, text, thread="t", at=T0, reply=None):
    msgs = [{"role": "user", "content": text}] + ([{"role": "assistant", "content": reply}] if reply else [])
    mem.add(msgs, user_id=user, thread_id=thread, at=at)


def test_the_articles_sports_example_is_scoped_to_the_user(mem):
    for text, cat in (("我喜欢吃火锅", "preference"), ("我平时喜欢跑步", "hobby"), ("我正在学习LangChain", "learning")):
        mem.add({"role": "user", "content": text, "metadata": {"category": cat}}, user_id="user_001", thread_id="notes", at=T0)
    save(mem, "user_002", "我平时喜欢打篮球", thread="notes")
    assert mem.store.jobs.pending() > 0  # nothing was embedded inside add()
    mem.flush()
    hits = mem.search("我喜欢什么运动？", user_id="user_001", at=T0 + timedelta(days=1))
    assert hits and "我平时喜欢跑步" in hits[0].unit.text
    assert all(h.unit.scope.user_id == "user_001" for h in hits)
    assert not any("篮球" in h.unit.text for h in hits)
    hobby = mem.search("我喜欢什么运动？", user_id="user_001", at=T0 + timedelta(days=1), where=SearchFilter(categories=("hobby",)))
    assert [h.unit.category for h in hobby] == ["hobby"]


def test_a_fact_from_ten_sessions_ago_is_recalled(mem):
    user = "engineer"
    save(mem, user, "我的职业是软件工程师", thread="s0", at=T0, reply="了解，你是软件工程师。")
    chatter = [
        "今天去超市买了苹果",
        "周末看了一部电影",
        "我养了一只猫叫咪咪",
        "最近在读《三体》",
        "明天要去北京出差",
        "晚饭吃了饺子",
        "我在学弹吉他",
        "下雨了没带伞",
        "给妈妈打了电话",
    ]
    for i, text in enumerate(chatter, 1):
        save(mem, user, text, thread=f"s{i}", at=T0 + timedelta(days=i), reply="好的")
    mem.flush()
    ctx = mem.context(user_id=user, thread_id="s10", query="我的职业是什么？", at=T0 + timedelta(days=11), strategy="window,retrieval")
    memory_text = "\n".join(m.text for m in ctx.messages if m.role == "system")
    assert "软件工程师" in memory_text and "2026-09-01" in memory_text
    assert ctx.messages[-1].text == "我的职业是什么？"
    assert ctx.sections["memory"] > 0


def test_an_unrelated_question_injects_nothing(mem):
    user = "foodie"
    for i, text in enumerate(["我喜欢吃火锅", "我平时喜欢跑步", "我正在学习LangChain"]):
        save(mem, user, text, thread="notes", at=T0 + timedelta(minutes=i))
    mem.flush()
    for question in ("量子纠缠的基本原理是什么？", "What is the capital of Australia?"):
        ctx = mem.context(user_id=user, thread_id="new", query=question, at=T0 + timedelta(days=1), strategy="window,retrieval")
        assert [m.text for m in ctx.messages] == [question], question
        assert mem.search(question, user_id=user, at=T0 + timedelta(days=1)) == []


def test_a_reply_joins_its_question_and_the_window_is_not_repeated(mem):
    user = "joiner"
    save(mem, user, "我的车牌号是京A12345", thread="car", at=T0)
    mem.flush()
    mem.add({"role": "assistant", "content": "记住了，京A12345。"}, user_id=user, thread_id="car", at=T0 + timedelta(minutes=1))
    mem.flush()
    hits = mem.search("我的车牌号是多少？", user_id=user, at=T0 + timedelta(days=1))
    assert len(hits) == 1 and hits[0].unit.text == "用户: 我的车牌号是京A12345\n助手: 记住了，京A12345。"
    ctx = mem.context(user_id=user, thread_id="car", query="我的车牌号是多少？", at=T0 + timedelta(days=1), strategy="window,retrieval")
    assert not any(m.role == "system" for m in ctx.messages)  # already in the window: not repeated


def test_time_in_the_question_prefers_that_period(mem):
    user = "traveller"
    save(mem, user, "我去了杭州旅游", thread="a", at=datetime(2026, 8, 3, 10, tzinfo=timezone.utc))
    save(mem, user, "我去了成都旅游", thread="b", at=datetime(2026, 8, 26, 10, tzinfo=timezone.utc))
    mem.flush()
    at = datetime(2026, 9, 1, 10, tzinfo=timezone.utc)  # a Tuesday; last week = Aug 24-30
    assert "成都" in mem.search("我上周去哪里旅游了？", user_id=user, at=at)[0].unit.text
    assert "成都" in mem.search("Where did I travel last week?", user_id=user, at=at)[0].unit.text
    assert "杭州" in mem.search("我8月3日去哪里旅游了？", user_id=user, at=at)[0].unit.text


def test_a_period_named_gives_one_order_for_every_k(mem):
    # what was said in the period comes first (it is ranked among itself as one more list of the
    # fusion), and the first k results are the same whatever k is asked for (they used to be cut
    # before the merge, so k changed the order)
    user = "diarist"
    topics = ["历史", "科学", "旅行", "烹饪"]
    for day in range(1, 29):
        text = f"今天我读完了第{day}本书，是关于{topics[day % 4]}的，一共{100 + day * 7}页"
        save(mem, user, text, thread=f"d{day}", at=datetime(2026, 8, day, 10, tzinfo=timezone.utc))
    mem.flush()
    at = datetime(2026, 9, 1, 10, tzinfo=timezone.utc)
    for query in ("我上周读了什么书？", "What did I read last week?", "我8月25日读了什么书？"):
        hits = mem.search(query, user_id=user, at=at, k=20)
        full = [h.unit.id for h in hits]
        if "8月25日" not in query:
            assert len(hits) >= 5 and {h.unit.timestamp.day for h in hits[:5]} == {24, 25, 26, 27, 28}, query
        for k in (1, 2, 3, 5, 10):
            assert [h.unit.id for h in mem.search(query, user_id=user, at=at, k=k)] == full[:k], (query, k)
    day = mem.search("我8月25日读了什么书？", user_id=user, at=at, k=1)[0].unit
    assert day.timestamp.date().isoformat() == "2026-08-25"


def test_what_was_said_later_about_the_period_named_is_found(mem):
    # "上个月我把白色运动鞋洗干净了" said on 09-01 speaks of August; "我上个月洗了哪双鞋？" asked that
    # day names August, where the user only talked of other shoes: the later round must lead
    # (it was ranked below August's rounds, which the period list lifts)
    at = datetime(2026, 9, 1, 18, tzinfo=timezone.utc)  # a Tuesday: last month = August
    user = "cleaner"
    save(
        mem,
        user,
        "我这个月买了一双新的登山靴，准备九月去爬山",
        thread="a",
        at=datetime(2026, 8, 12, 10, tzinfo=timezone.utc),
        reply="登山靴记得提前磨合。",
    )
    save(
        mem,
        user,
        "我的皮鞋鞋跟坏了，送去修鞋店换了鞋跟",
        thread="b",
        at=datetime(2026, 8, 20, 10, tzinfo=timezone.utc),
        reply="修好了就好。",
    )
    save(
        mem,
        user,
        "上个月我终于把那双白色的阿迪达斯运动鞋洗干净了，之前一直拖着",
        thread="c",
        at=datetime(2026, 9, 1, 9, tzinfo=timezone.utc),
        reply="洗干净的运动鞋看着就舒服。",
    )
    user_en = "cleaner-en"
    save(
        mem,
        user_en,
        "I bought new hiking boots this month for a trip in September",
        thread="a",
        at=datetime(2026, 8, 12, 10, tzinfo=timezone.utc),
        reply="Break them in first.",
    )
    save(
        mem,
        user_en,
        "The heel of my leather shoes broke, so I took them to a cobbler",
        thread="b",
        at=datetime(2026, 8, 20, 10, tzinfo=timezone.utc),
        reply="Good that it is fixed.",
    )
    save(
        mem,
        user_en,
        "I finally cleaned my white Adidas sneakers last month, after putting it off for weeks",
        thread="c",
        at=datetime(2026, 9, 1, 9, tzinfo=timezone.utc),
        reply="Clean sneakers look great.",
    )
    mem.flush()
    assert "阿迪达斯" in mem.search("我上个月洗了哪双鞋？", user_id=user, at=at)[0].unit.text
    assert "Adidas" in mem.search("Which pair of shoes did I clean last month?", user_id=user_en, at=at)[0].unit.text


def test_forgetting_a_user_removes_units_vectors_and_cache(tmp_path):
    with Memory(tmp_path / "f.db", layers=["retrieval"]) as m:
        save(m, "gone", "我的密码提示是小狗的名字", thread="x")
        save(m, "stays", "我的密码提示是小猫的名字", thread="x")
        m.flush()
        assert m.search("密码提示", user_id="gone")
        m.forget(user_id="gone")
        assert m.search("密码提示", user_id="gone") == []
        assert m.store.vectors.info()[2] == 1
        assert m.search("密码提示", user_id="stays")
        rows = m.store.query("SELECT count(*) FROM sqlite_master WHERE type = 'table'")[0][0]
        assert rows > 0
        for table in [r[0] for r in m.store.query("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%user_id%'")]:
            assert m.store.query(f"SELECT count(*) FROM {table} WHERE user_id = 'gone'")[0][0] == 0, table
        # the record of the deletion keeps the id's digest, not the id
        assert "gone" not in repr(m.store.query("SELECT * FROM deletions"))


def test_search_command(tmp_path):
    env = {**os.environ, "MEMSTACK_HOME": str(tmp_path)}
    with Memory(tmp_path / "memstack.db", layers=["retrieval"]) as m:
        for text in ("我喜欢吃火锅", "我平时喜欢跑步", "我正在学习LangChain"):
            save(m, "user_001", text, thread="notes")
        m.flush()
    out = subprocess.run(
        [sys.executable, "-m", "memstack", "search", "--user", "user_001", "--k", "2", "--json", "我喜欢什么运动？"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()
    data = json.loads(out.stdout)
    assert len(data) <= 2 and "跑步" in data[0]["text"] and 0 <= data[0]["score"] <= 1


def test_a_new_embedder_is_refused_until_reindex(tmp_path):
    from memstack.layers.retrieval import reindex

    db = tmp_path / "re.db"
    with Memory(db, layers=["retrieval"]) as m:
        save(m, "u", "我平时喜欢跑步", thread="a")
        assert m.flush().failed == 0
        assert m.store.vectors.info()[:2] == (m._layer("retrieval", {}).searcher.embedder.name, 384)
    with pytest.raises(ProfileMismatch, match="embedder"):  # the store's profile says which
        Memory(db, layers=["retrieval"], options={"embedder": "use"})
    with Memory(db) as m:  # below the profile, the index itself refuses vectors of another model
        layer = Retrieval(store=m.store, embedder="use")
        (added,) = m.store.history.append(m.scope("u", "b"), [Message(role="user", content="我喜欢吃火锅")])
        with pytest.raises(MemstackError, match="reindex"):
            layer.write(WriteRequest(m.scope("u", "b"), [added], True, m.store, 0))
        assert reindex(m.store, "use") == 2  # both units, the refused write's included
        assert m.store.vectors.info()[1] == 512
        hits = m.search("我喜欢什么运动？", user_id="u", embedder="use")
        assert any("跑步" in h.unit.text for h in hits)  # searched with the new model


def test_reconfiguring_the_embedder_reindexes(tmp_path):
    db = tmp_path / "re.db"
    with Memory(db, layers=["retrieval"]) as m:
        save(m, "u", "我平时喜欢跑步", thread="a")
        assert m.flush().failed == 0
    Memory.configure(db, layers=["retrieval"], options={"embedder": "use"}, reconfigure=True)
    with Memory(db) as m:
        assert m.store.vectors.info()[1] == 512
        save(m, "u", "我喜欢吃火锅", thread="b")
        assert m.flush().failed == 0
        assert any("跑步" in h.unit.text for h in m.search("我喜欢什么运动？", user_id="u"))


def test_rechunk_cuts_the_threads_again_and_keeps_other_units(tmp_path):
    from memstack.layers.retrieval import reindex
    from memstack.types import Scope, Unit

    db = tmp_path / "rc.db"
    reply = "".join(f"第{i}条建议：每周跑三次，每次三十分钟，跑前热身，跑后拉伸。" for i in range(12))
    with Memory(db, layers=["retrieval"], options={"chunk_tokens": 60}) as m:
        save(m, "u", "我平时喜欢跑步，你有什么训练建议吗？", thread="a", reply=reply)
        save(m, "v", "我喜欢游泳", thread="b", reply="好的")
        assert m.flush().failed == 0
        thread = Scope(user_id="u", thread_id="a")
        before = [x for b in m.store.units.iterate(thread) for x in b]
        assert len(before) > 3 and {x.kind for x in before} == {"chunk"}
        model = m._layer("retrieval", {}).searcher.embedder
        fact = Unit(id="f-1", scope=thread, text="用户的职业是软件工程师", timestamp=T0, kind="fact")
        m.store.units.put([fact])
        m.store.vectors.upsert([fact], model.embed_documents([fact.text]), model=model.name)
        vectors_before = m.store.vectors.info()[2]
    with Memory(db, layers=["retrieval"]) as m:
        assert reindex(m.store, rechunk=True, chunk_tokens=2000) == 2  # one unit per round now
        after = [x for b in m.store.units.iterate(thread) for x in b]
        assert sorted(x.kind for x in after) == ["fact", "round"]
        whole = next(x for x in after if x.kind == "round")
        assert reply in whole.text and whole.metadata["roles"] == ["assistant", "user"]
        assert m.store.vectors.fetch(thread, [x.id for x in before if x.id != whole.id]) == {}
        assert m.store.vectors.info()[2] < vectors_before and m.store.vectors.fetch(thread, ["f-1", whole.id]).keys() == {"f-1", whole.id}
        assert "跑步" in m.search("我喜欢什么运动？", user_id="u", k=1)[0].unit.text
        assert [h.unit.scope.user_id for h in m.search("我喜欢什么运动？", user_id="v")] == ["v"]
    bad = subprocess.run(
        [sys.executable, "-m", "memstack", "reindex", "--db", f"sqlite:///{db}", "--chunk-tokens", "100"],
        capture_output=True,
        text=True,
        env={**os.environ, "MEMSTACK_HOME": str(tmp_path)},
    )
    assert bad.returncode != 0 and "--rechunk" in bad.stderr


def test_a_fact_said_in_passing_in_a_long_message_is_found_by_its_sentence_key(tmp_path):
    from test_retrieval_units import LONG_USER

    filler = [
        "Can you recommend a good recipe for a vegetarian lasagna? I want something that can be prepared the night before and baked the next day, with lots of vegetables and not too much cheese, because my sister is lactose intolerant and we are hosting her family.",
        "I need help writing a cover letter for a data analyst position at a logistics company. I have three years of experience with SQL and Python dashboards, and I led a project that cut delivery delays by twelve percent last year.",
        "What are some good exercises for lower back pain? I sit at a desk for most of the day and my back gets stiff by the afternoon, especially when I skip my morning walk.",
    ]
    with Memory(tmp_path / "k.db", layers=["retrieval"]) as mem:
        for i, text in enumerate([*filler, LONG_USER]):
            mem.add(
                [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": "Sure. " + "Here are a few detailed suggestions that should help you with this. " * 8},
                ],
                user_id="u",
                thread_id=f"s{i}",
            )
        mem.flush()
        hits = mem.search("How long have I owned my guitar?", user_id="u", k=1)
        assert hits and "Yamaha FG800" in hits[0].unit.text
        units = sum(len(b) for b in mem.store.units.iterate(mem.scope("u")))
        assert mem.store.vectors.info()[2] > units  # each unit's vector, plus the user's sentences


def test_a_short_turn_comes_with_its_neighbours(tmp_path):
    turns = [
        ("Alice", "I finally adopted a dog from the shelter last weekend."),
        ("Bob", "What breed is it?"),
        ("Alice", "A border collie named Pepper."),
        ("Bob", "Nice! I have been learning the cello since spring."),
        ("Alice", "The tax office sent me a letter about my car registration."),
    ]
    with Memory(tmp_path / "n.db", layers=["retrieval"]) as mem:
        for i, (name, text) in enumerate(turns):
            mem.add({"role": "user", "name": name, "content": text}, user_id="u", thread_id="s1", at=T0 + timedelta(minutes=i))
        mem.flush()
        hit = mem.search("What is the name of Alice's border collie?", user_id="u", k=1)[0]
        assert "Pepper" in hit.unit.text and "cello" not in hit.unit.text

        def memory_text(**options):
            ctx = mem.context(
                user_id="u",
                thread_id="s2",
                query="What is the name of Alice's border collie?",
                max_tokens=600,
                **{"retrieval.top_k": 1, **options},
            )
            return "\n".join(m.text for m in ctx.messages if m.role == "system")

        plain = memory_text(**{"retrieval.neighbours": 0})
        assert "Pepper" in plain and "cello" not in plain and "adopted a dog" not in plain
        expanded = memory_text()
        assert "Pepper" in expanded and "cello" in expanded  # the next turn
        assert expanded.index("breed") < expanded.index("Pepper") < expanded.index("cello")  # in the order said
        other = mem.context(user_id="someone", thread_id="s2", query="What is the name of Alice's border collie?", max_tokens=600)
        assert all("Pepper" not in m.text for m in other.messages)
