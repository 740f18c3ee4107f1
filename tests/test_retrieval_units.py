"""Units from messages, rank fusion and rendering: the pure parts of retrieval."""

from datetime import datetime, timedelta, timezone

from memstack.retrieval.fusion import rrf
from memstack.retrieval.render import fit_hits, render_hits
from memstack.retrieval.units import dense_text, language, rounds, units_for_round
from memstack.tokens import get_counter
from memstack.types import Hit, Message, Scope, Scored, ToolCall, Unit

T0 = datetime(2026, 11, 2, 20, 0, tzinfo=timezone(timedelta(hours=8)))
S = Scope(user_id="user_001", thread_id="s1")
EST = get_counter()


def m(role, text, i=0, **kw):
    return Message(role=role, content=text, timestamp=T0 + timedelta(minutes=i), **kw)


def test_rounds_and_units_of_a_short_round():
    msgs = [m("system", "规则"), m("user", "我平时喜欢跑步", 1), m("assistant", "跑步很健康", 2), m("user", "我叫李四", 3)]
    groups = rounds(msgs)
    assert [[x.text for x in g] for g in groups] == [["我平时喜欢跑步", "跑步很健康"], ["我叫李四"]]
    units = units_for_round(S, groups[0], 1, EST)
    assert len(units) == 1
    u = units[0]
    assert u.text == "用户: 我平时喜欢跑步\n助手: 跑步很健康"
    assert u.id == f"{groups[0][0].id}:0" and u.kind == "round" and u.round == 1
    assert u.source_ids == (groups[0][0].id, groups[0][1].id) and u.timestamp == groups[0][0].timestamp


def test_same_round_gives_the_same_ids():
    msgs = [m("user", "问题"), m("assistant", "回答", 1)]
    assert [u.id for u in units_for_round(S, msgs, 1, EST)] == [u.id for u in units_for_round(S, msgs[:1], 1, EST)]


def test_names_tool_traffic_and_english_labels():
    call = ToolCall(id="c1", name="lookup")
    msgs = [
        m("user", "When did Caroline go to the support group?", name="Melanie"),
        m("assistant", "", tool_calls=(call,)),
        m("tool", '{"x": 1}', tool_call_id="c1"),
        m("assistant", "She went on 7 May.", 1),
    ]
    (u,) = units_for_round(S, msgs, 3, EST)
    assert u.text == "Melanie: When did Caroline go to the support group?\nAssistant: She went on 7 May."
    assert u.source_ids == (msgs[0].id, msgs[3].id)


def test_long_rounds_are_chunked_at_sentences_within_the_limit():
    long = "。".join(f"第{i}句讲了一件很具体的事情，包含数字{i * 7}" for i in range(60)) + "。"
    msgs = [m("user", "给我讲讲"), m("assistant", long, 1)]
    units = units_for_round(S, msgs, 1, EST, chunk_tokens=120)
    assert len(units) > 5 and all(u.kind == "chunk" for u in units)
    assert all(EST.count(u.text) <= 120 + 5 for u in units)
    assert units[0].text.startswith("用户: 给我讲讲")
    body = "".join(u.text.replace("助手: ", "").replace("用户: 给我讲讲\n", "") for u in units)
    assert body == long
    assert len({u.id for u in units}) == len(units)


def test_language():
    assert language("我喜欢跑步 and hiking") == "zh" and language("I like running") == "en"


def test_rrf_weights_and_ties():
    fused = rrf({"bm25": [Scored("a", 0.9), Scored("b", 0.5)], "dense": [Scored("b", 0.8), Scored("c", 0.7)]})
    assert [f.id for f in fused] == ["b", "a", "c"]
    assert fused[0].ranks == {"bm25": 2, "dense": 1}
    heavy = rrf({"bm25": [Scored("a", 0.9)], "dense": [Scored("c", 0.7)]}, weights={"dense": 2.0})
    assert [f.id for f in heavy] == ["c", "a"]


def hit(text, day, thread="s1", score=1.0):
    u = Unit(id=text, scope=Scope(user_id="u", thread_id=thread), text=text, timestamp=T0 + timedelta(days=day))
    return Hit(u, score)


def test_render_groups_by_day_in_time_order():
    text = render_hits([hit("用户: 后来的事", 3), hit("用户: 先前的事", 0), hit("用户: 同一天", 0)])
    assert text.splitlines() == [
        "以下是从历史对话中检索到的相关记忆（按时间排序）：",
        "[2026-11-02 周一]",
        "用户: 先前的事",
        "用户: 同一天",
        "[2026-11-05 周四]",
        "用户: 后来的事",
    ]
    assert render_hits([]) == ""


def test_fit_hits_keeps_the_most_relevant_within_budget():
    hits = [hit("用户: " + "重要" * 30, 5), hit("用户: 次要", 1), hit("用户: " + "很长" * 100, 2)]
    budget = EST.count(render_hits(hits[:2]))
    kept = fit_hits(hits, budget, EST)
    assert [h.unit.id for h in kept] == [hits[0].unit.id, hits[1].unit.id]
    assert fit_hits(hits, budget - 1, EST) == [hits[0]]
    assert fit_hits(hits, None, EST) == hits


LONG_USER = (
    "I'm planning a weekend trip to the mountains and I need a packing list for cold weather hiking. "
    "The forecast says it will be around minus five degrees at night, and we will camp for two nights. "
    "I also want to bring enough food for three people without carrying too much weight on the trail. "
    "By the way, I've had my acoustic guitar, a Yamaha FG800, for about eight years now."
)


def test_a_long_unit_lists_the_users_sentences_as_keys_and_a_short_one_none():
    long_round = [m("user", LONG_USER, 1), m("assistant", "Here is a packing list. " * 20, 2)]
    units = units_for_round(S, long_round, 1, EST)
    keys = units[0].metadata["keys"]
    assert "By the way, I've had my acoustic guitar, a Yamaha FG800, for about eight years now." in keys
    assert all("packing list." not in k for k in keys)  # the assistant's sentences are not keys
    assert all(not u.metadata.get("keys") for u in units[1:] if all(s[2] == "Assistant" for s in u.metadata["spans"]))
    short = units_for_round(S, [m("user", "我平时喜欢跑步，周末也会去爬山。", 1), m("assistant", "很健康", 2)], 1, EST)
    assert "keys" not in short[0].metadata
    assert "keys" not in units_for_round(S, long_round, 1, EST, key_min_tokens=None)[0].metadata


def test_dense_text_drops_generic_role_labels_keeps_names_and_the_head():
    zh = units_for_round(S, [m("user", "我平时喜欢跑步"), m("assistant", "跑步很健康", 1)], 1, EST)[0]
    assert dense_text(zh, 128, EST) == "我平时喜欢跑步\n跑步很健康"
    named = units_for_round(
        S, [m("user", "I went to the support group yesterday.", name="Caroline"), m("assistant", "How was it?", 1)], 1, EST
    )[0]
    assert dense_text(named, 128, EST) == "Caroline: I went to the support group yesterday.\nHow was it?"
    long = units_for_round(S, [m("user", "我喜欢跑步。" * 40)], 1, EST, chunk_tokens=10_000)[0]
    cut = dense_text(long, 20, EST)
    assert EST.count(cut) <= 20 and cut.startswith("我喜欢跑步") and "用户" not in cut
    bare = Unit(id="x:0", scope=S, text="用户: 没有 spans 的单元", timestamp=T0)
    assert dense_text(bare, 128, EST) == bare.text
