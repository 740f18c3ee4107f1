"""The assistant asked, the user answered: a hit ending with the assistant's question is preceded
by the round that answers it, when that round is a hit too (the question repeats the query's
words, the answer holds the fact)."""

from datetime import datetime, timedelta, timezone

from memstack import Memory
from memstack.retrieval.search import answers_first, closing_question
from memstack.retrieval.units import units_for_round
from memstack.tokens import get_counter
from memstack.types import Hit, Message, Scope

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 11, 1, 20, 0, tzinfo=TZ)
S = Scope(user_id="u", thread_id="t")
EST = get_counter()


def rounds(*pairs):
    msgs = [
        Message(role=role, content=text, timestamp=T0 + timedelta(minutes=i), seq=i + 1)
        for i, (role, text) in enumerate((r, t) for p in pairs for r, t in zip(("user", "assistant"), p, strict=True))
    ]
    return [msgs[i : i + 2] for i in range(0, len(msgs), 2)]


ASKED = ("我想找一些电影看，有什么推荐吗？", "当然，你喜欢哪种类型的电影呢？")
ANSWERED = ("我喜欢喜剧和爱情片。", "喜剧可以看《人在囧途》，爱情片可以看《怦然心动》。")


def units():
    first, second = rounds(ASKED, ANSWERED)
    (question,) = units_for_round(S, first, 1, EST)
    (answer,) = units_for_round(S, second, 2, EST, previous=first)
    return question, answer


def test_the_answer_to_the_assistants_question_goes_first():
    question, answer = units()
    assert closing_question(question) == question.source_ids[-1]
    assert closing_question(answer) is None
    hits = [Hit(question, 0.041, {}), Hit(answer, 0.024, {})]
    assert [h.unit.id for h in answers_first(hits, 0.5)] == [answer.id, question.id]


def test_a_weak_answer_or_none_keeps_the_order():
    question, answer = units()
    assert [h.unit.id for h in answers_first([Hit(question, 0.05, {}), Hit(answer, 0.02, {})], 0.5)] == [question.id, answer.id]
    assert [h.unit.id for h in answers_first([Hit(question, 0.05, {})], 0.5)] == [question.id]


def test_a_question_the_user_asked_is_not_moved_behind_its_reply():
    (a,) = units_for_round(S, [Message(role="user", content="我喜欢看电影，你呢？", timestamp=T0, seq=1)], 1, EST)
    assert closing_question(a) is None


def test_between_people_the_reply_to_a_named_speakers_question_goes_first():
    said = [
        Message(role="user", name=n, content=t, timestamp=T0 + timedelta(minutes=i), seq=i + 1)
        for i, (n, t) in enumerate(
            [("Mel", "I went camping last weekend. Have you ever been?"), ("Caroline", "Yes, I camped at Big Sur in May.")]
        )
    ]
    (question,) = units_for_round(S, said[:1], 1, EST)
    (answer,) = units_for_round(S, said[1:], 2, EST, previous=said[:1])
    assert closing_question(question) == said[0].id
    assert [h.unit.id for h in answers_first([Hit(question, 0.04, {}), Hit(answer, 0.03, {})], 0.5)] == [answer.id, question.id]


def test_through_memory_the_users_answer_is_the_first_hit(tmp_path):
    turns = [
        *ASKED,
        *ANSWERED,
        "最近在学英语，有什么办法提升听力吗？",
        "可以多听英文歌、看英文电影，或者找外国朋友聊天。",
        "周末想去爬山。",
        "天气不错，爬山很适合，记得带水。",
    ]
    with Memory(tmp_path / "m.db", layers=["retrieval"]) as memory:
        memory.add(
            [
                {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": (T0 + timedelta(minutes=i)).isoformat()}
                for i, t in enumerate(turns)
            ],
            user_id="u",
            thread_id="t",
        )
        memory.flush()
        hits = memory.search("我喜欢看哪些类型的电影？", user_id="u", k=3)
    assert hits and "喜剧和爱情片" in hits[0].unit.text
