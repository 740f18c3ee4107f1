"""A hit whose whole text the better hits already show is left out of the results: it would add
nothing to the rendered context and take one of the k places (short turns between people are
each led in by the turn before, so three adjacent turns can be shown by two units)."""

from datetime import datetime, timedelta, timezone

from memstack import Memory
from memstack.retrieval.render import render_hits
from memstack.retrieval.search import without_repeats
from memstack.retrieval.units import units_for_round
from memstack.tokens import get_counter
from memstack.types import Hit, Message, Scope

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 11, 1, 20, 0, tzinfo=TZ)
S = Scope(user_id="u", thread_id="t")
EST = get_counter()


def said(*turns):
    return [
        Message(role="user", name=name, content=text, timestamp=T0 + timedelta(minutes=i), seq=i + 1)
        for i, (name, text) in enumerate(turns)
    ]


def units_of(messages):
    out = []
    for i, m in enumerate(messages):
        (unit,) = units_for_round(S, [m], i + 1, EST, previous=messages[i - 1 : i] if i else ())
        out.append(unit)
    return out


SHORT = said(
    ("Mel", "I went camping at Big Sur last weekend."), ("Caroline", "Wow, how was it?"), ("Mel", "Amazing, the kids loved the campfire.")
)


def test_a_unit_the_hits_before_it_show_whole_is_left_out():
    first, second, third = units_of(SHORT)
    hits = [Hit(third, 0.05, {}), Hit(first, 0.04, {}), Hit(second, 0.03, {})]
    # the third unit is led in by the second turn, the first unit is the first turn: the second
    # unit (the first turn as lead-in, then the second turn) adds nothing
    kept = without_repeats(hits)
    assert [h.unit.id for h in kept] == [third.id, first.id]
    assert render_hits(kept) == render_hits(hits)


def test_a_unit_with_text_of_its_own_is_kept():
    first, second, third = units_of(SHORT)
    assert [h.unit.id for h in without_repeats([Hit(second, 0.05, {}), Hit(third, 0.04, {}), Hit(first, 0.03, {})])] == [
        second.id,
        third.id,
    ]
    # order matters: the better hit is kept, the one it shows is dropped
    assert [h.unit.id for h in without_repeats([Hit(first, 0.05, {}), Hit(third, 0.04, {}), Hit(second, 0.03, {})])] == [first.id, third.id]


def test_a_lead_in_cut_short_does_not_show_the_turn_it_comes_from():
    long_turn = "I went camping at Big Sur last weekend with my husband and the three kids, " * 4 + "and we stayed for two nights."
    first, second = units_of(said(("Mel", long_turn), ("Caroline", "Wow, sounds like a great trip!")))
    assert [h.unit.id for h in without_repeats([Hit(second, 0.05, {}), Hit(first, 0.04, {})])] == [second.id, first.id]


def test_through_memory_no_hit_repeats_the_ones_before_it(tmp_path):
    with Memory(tmp_path / "m.db", layers=["retrieval"]) as memory:
        memory.add(
            [{"role": "user", "name": m.name, "content": m.text, "timestamp": m.timestamp.isoformat()} for m in SHORT],
            user_id="u",
            thread_id="t",
        )
        memory.flush()
        hits = memory.search("Where did Mel go camping with the kids?", user_id="u", k=10)
    assert hits
    assert len(without_repeats(hits)) == len(hits)
