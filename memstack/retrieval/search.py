"""Hybrid search over one user's units: BM25 and dense vectors fused by rank, time-aware, with a
relevance floor so that an unrelated question retrieves nothing.

Steps, each a small function: find a time range in the query ("上周", "last May") relative to the
request's ``at``; ask the keyword and vector indexes for candidates (and, when the query names a
period, for the candidates said in it or said of a day in it, ranked among themselves as one
more list); fuse by weighted reciprocal rank; keep candidates that pass the relevance floor (a lower one for a
first-person question that nothing passes) and stand high enough in the list that found them;
hydrate the units, weighting the bare tail of a long answer down; break ties by recency; for a
question about now, put the newest round on the best hit's subject first; leave out a hit whose
whole text the hits before it already show.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from ..errors import InvalidInput
from ..providers.embeddings import Embedder
from ..stores import UnitStore, VectorIndex
from ..text import segment
from ..timeparse import TimeRange, parse_time_range
from ..types import Hit, Scope, Scored, SearchFilter, Unit
from .asked import ASKS, ASSISTANT_LABELS, USER_LABELS, asked_only, first_person, speaks_to_assistant
from .changes import change_words
from .fusion import Fused, rrf
from .periods import said_in, speaks_of
from .units import LABELS, language, own_text

METHODS = ("hybrid", "bm25", "dense")
#: vector ids "UNIT~kN" are sentence keys of unit UNIT (see the retrieval layer)
KEY_MARK = "~k"


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How hybrid search ranks: candidates per retriever, fusion weights, the relevance floor."""

    method: str = "hybrid"
    candidates: int = 50
    weights: tuple[tuple[str, float], ...] = (("bm25", 1.0), ("dense", 1.0), ("keys", 1.0), ("feedback", 0.5), ("period", 2.0))
    #: the vector index also holds sentence keys: rank units by their best key as a third list
    keys: bool = True
    #: pseudo-relevance feedback (Rocchio): the query vector moved toward the stored vectors of the
    #: first ``feedback`` relevant candidates re-scores the vector search's pool (4 x candidates),
    #: a fourth list at half weight (0: off). It finds what the question names only by kind
    #: ("musical instruments" -> the piano mentioned once): LongMemEval sample R@10 .83 -> .87,
    #: MemoryBank-CN R@1 kept at .70, LoCoMo R@10 .773 -> .769 (.763 at full weight)
    feedback: int = 3
    feedback_weight: float = 0.5
    #: a dense hit counts as relevant when its cosine similarity beats the query's similarity to
    #: unrelated background text by this margin (e5 similarities are compressed near 0.8)
    dense_margin: float = 0.02
    #: a dense hit in the other language than the query's (an English question over "我叫王五")
    #: is measured against the background in its own language, by this smaller margin: across
    #: languages e5's similarities are compressed further, and an English question is closer to
    #: English small talk than to the Chinese round that answers it (None: off, every hit against
    #: the query's own background). The fact set's 75 questions asked in the other language:
    #: R@3 .61 (off) -> .87 (same language: .99, unchanged). Unrelated questions in the other
    #: language retrieve something for 8 of 275 (3%; 0.01: 20, 0.005: 31, 0: 57) where unrelated
    #: questions in the memory's own language do for 45 of 253; LoCoMo, LongMemEval, MemoryBank-CN
    #: and LifeAssist-CN recall unchanged (see BENCHMARKS.md "Across languages")
    cross_margin: float | None = 0.015
    #: the margin for a question in the first person ("我在哪个城市？", "where do I live?") when
    #: nothing passes the one above: the background is everyday first-person talk, which such a
    #: question resembles as much as it resembles what the user said of themself ("我在杭州做前端
    #: 开发", answered "好的，我记住了。": +0.008 over background; see ``Searcher._relaxed``)
    self_margin: float = 0.005
    #: under that lower floor, a list's best candidate also lets through what scores within this
    #: much of it (see ``Searcher._relaxed``)
    self_band: float = 0.005
    #: a candidate's support is its best standing in the lists that found it: in each list, how
    #: far it is above the list's floor as a share of how far the list's best is (1: the best of
    #: some list; see ``support``). Candidates below ``relative_cut`` are dropped: in a short
    #: conversation every round passes the floors, and an unrelated one would otherwise come
    #: back for every question only because there are few (0: off). LongMemEval dev R@10 at
    #: tokens@10: 0.25 .921 at 2,608, 0.2 .930 at 2,641, 0 .930 at 2,705; LoCoMo .780 at all
    #: three; MemoryBank-CN R@1 .829 at all three, tokens@10 854 at 0.25, 986 at 0.2
    relative_cut: float = 0.2
    #: a question about now ("现在", "目前", "currently", "still"): the newest round on the best
    #: hit's subject (among the first ``present_window`` hits, or of each retriever's list below
    #: the floors) goes first, so that the later of two conflicting rounds ("我住在上海", then
    #: "我已经从上海搬到深圳了") comes first (1: off; see ``newest_on_subject``). LoCoMo conv-26:
    #: R@1 .430 -> .423 (one "how long has she had her current friends" question), R@5+ kept
    present_window: int = 5
    #: a question about now also searches the words that say its kind of fact changed (``changes``)
    change_words: bool = True
    #: a keyword hit counts as relevant when its normalised BM25 score reaches this
    bm25_floor: float = 0.0
    #: drop candidates below the floors above (off for the plain baselines of the benchmark)
    relevance_floor: bool = True
    #: rank what was said in a period the query names ("上周", "last May") among itself, as one
    #: more list in the fusion (its weight: "period" above)
    use_time: bool = True
    #: a unit holding only the assistant's words (the tail of a long answer) ranks at this share
    #: of its fused score, unless the query speaks to the assistant ("you", "你": "what did you
    #: recommend?"). Memory is mostly about what the user said, and the tail of a long list of
    #: suggestions matches any "can you suggest ..." question (1.0: off). LongMemEval dev (58
    #: questions) R@10: .921 -> .930 with 280-token chunks, .904 -> .921 with 300, .875 -> .881
    #: with 200 (0.8 gains a little more for more tokens); LoCoMo and MemoryBank-CN unchanged
    assistant_weight: float = 0.9
    #: a round in which the user only asked a question and the assistant answered it ("我现在住在
    #: 哪个城市？" / "根据你之前告诉我的，你住在上海") holds nothing the user said of themself: the
    #: answer may be the assistant's own mistake, and it repeats the question's words better than
    #: the round that holds the fact. Such a round does not set the bar of the relative cut
    #: (``relative_cut``), is not a seed of the feedback list, does not keep the lower floor of
    #: a first-person question away (``self_margin``) and is not taken for how things stand now
    #: (``newest_on_subject``); see ``asked_only``. False: treated as any other round
    #: (ranking such rounds lower as well, at 0.9, 0.8 or 0.7 of their fused score, changed no
    #: figure of the four development sets: LoCoMo has named speakers, and the others' evidence
    #: is rarely a bare question)
    asked: bool = True
    #: the assistant asked, the user answered: a hit that ends with the assistant's question
    #: ("你喜欢哪种类型的电影呢？") has the round that answers it ("我喜欢喜剧和爱情片") put before it,
    #: when that round is a hit scoring at least this share of the question's (0: off; see
    #: ``answers_first``). The question repeats the query's words, the answer holds the fact.
    #: The same between people (a named speaker's question, the other's reply). MemoryBank-CN
    #: R@1 .729 -> .829; LoCoMo R@1 .421 -> .434, R@10 .777 -> .780 at 579 tokens (0.3 and 0.7
    #: measured too: the same or better on both)
    answer_share: float = 0.5
    #: a query that names a period ("last month", "上周"): what the user said outside the period
    #: about a day in it ("I cleaned my sneakers last month", said after it; a plan said before
    #: it) joins what was said in it, looked for among this many of the first fused candidates
    #: (0: off; see ``Searcher._mentioning``). LongMemEval dev R@10 .930 -> .947 at the same
    #: tokens; LoCoMo, MemoryBank-CN and LifeAssist-CN as they were
    mentions: int = 100

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidInput(f"unknown search method {self.method!r}; expected one of {', '.join(METHODS)}", field="method")


class Searcher:
    """Searches one store's units (keyword) and vector index (dense) with one embedder."""

    def __init__(self, units: UnitStore, vectors: VectorIndex, embedder: Embedder, settings: SearchSettings | None = None) -> None:
        self.units = units
        self.vectors = vectors
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self._background: np.ndarray | None = None

    def search(self, scope: Scope, query: str, *, k: int = 10, at: datetime | None = None, where: SearchFilter | None = None) -> list[Hit]:
        """The user's most relevant units for ``query``, best first (for a question about now,
        the newest round on the best hit's subject before it); [] when nothing is relevant."""
        if k <= 0 or not query.strip():
            return []
        user = scope.user()
        where = where or SearchFilter()
        span = parse_time_range(query, at) if at is not None and self.settings.use_time else None
        fused, ranked = self._fused(user, query, where, span)
        weight = 1.0 if speaks_to_assistant(query) else self.settings.assistant_weight
        hits = self._hydrate(user, fused[: max(2 * k, MIN_HYDRATED)], assistant_weight=weight)
        if self.settings.answer_share > 0:
            hits = answers_first(hits, self.settings.answer_share)
        # a question that names a period ("the latest project in July") is not about now
        if hits and span is None and self.settings.present_window > 1 and asks_about_now(query):
            hits = self._now_first(user, hits, ranked[0], change_words(query) if self.settings.change_words else "")
        return without_repeats(hits)[:k]

    def _now_first(self, user: Scope, hits: list[Hit], rankings: dict[str, list[Scored]], changed: str = "") -> list[Hit]:
        """For a question about now: the best hit's subject (see ``newest_on_subject``), with the
        later rounds on it that the retrievers ranked among their first ``present_window`` even
        below the floors (an update rarely repeats the question's words: "我已经从上海搬到深圳了"
        for "我现在住在哪里？")."""
        window = self.settings.present_window
        shown = {h.unit.id for h in hits}
        anchor = next((h for h in hits if not (self.settings.asked and asked_only(h.unit))), hits[0])
        near = [
            i for items in rankings.values() for i in dict.fromkeys(x.id.rsplit(KEY_MARK, 1)[0] for x in items[:window]) if i not in shown
        ]
        later = [Hit(u, anchor.score, {}) for u in self.units.get(user, list(dict.fromkeys(near))) if u.timestamp > anchor.unit.timestamp]
        return newest_on_subject(hits, window, later, asked=self.settings.asked, changed=changed)

    # ---- candidates --------------------------------------------------------------------------

    def _fused(
        self, user: Scope, query: str, where: SearchFilter, span
    ) -> tuple[list[Fused], tuple[dict[str, list[Scored]], dict[str, float]]]:
        """The relevant candidates fused, and the rankings with their floors they came from."""
        ranked, asked = self._rank(user, query, where)
        if span is None:
            found = self._relevant(ranked, asked=asked)
            if all(f.id in asked for f in found):  # nothing passed, or only the user's own asking
                found = self._relevant(self._relaxed(ranked, query, asked), asked=asked) or found
            return found, ranked
        inside = replace(where, since=_later(where.since, span.since), until=_earlier(where.until, span.until))
        # the question names a period: what was said then, ranked among itself (floors aside:
        # all of it is a candidate), is one more list in the fusion. It lifts the period's units
        # above equally good matches from other times without burying a clearly better match
        # from outside it (people date things loosely: "10 days ago", "last month" said of a
        # thing done at the start of this one)
        lists, floors = self._rank(user, query, inside)[0]
        if self.settings.mentions > 0:
            # what was said outside the period about a day in it joins the period's candidates,
            # each retriever's list in its own scores (see ``_mentioning``)
            mentioned = self._mentioning(user, ranked, span)
            lists = {
                name: sorted([*items, *(x for x in ranked[0].get(name, ()) if x.id in mentioned)], key=lambda x: -x.score)
                for name, items in lists.items()
            }
        period = [Scored(f.id, f.score) for f in self._relevant((lists, floors), floors=False)]
        return self._relevant(ranked, extra={"period": period}, asked=asked), ranked

    def _mentioning(self, user: Scope, ranked: tuple[dict[str, list[Scored]], dict[str, float]], span: TimeRange) -> set[str]:
        """Among the first ``mentions`` candidates of the fused lists (floors aside), those said
        outside the period the query names in which the user (not the assistant: "enjoy your
        weekend") speaks of a day in it ("I finally cleaned my white sneakers last month", said
        on 05-24, for "which shoes did I clean last month?" asked the same day; "下周三发布" said
        before it)."""
        first = rrf(ranked[0], weights=dict(self.settings.weights))[: self.settings.mentions]
        by_id = {u.id: u for u in self.units.get(user, [f.id for f in first])}
        return {f.id for f in first if (u := by_id.get(f.id)) is not None and not said_in(u, span) and speaks_of(u, span)}

    def _asked(self, user: Scope, rankings: dict[str, list[Scored]]) -> frozenset[str]:
        """Which of the first ``ASKED_PEEK`` candidates of each list are rounds in which the user
        only asked (see ``asked_only``): they do not set a list's bar in the relative cut."""
        if not (self.settings.asked and self.settings.relevance_floor):
            return frozenset()
        ids = list(dict.fromkeys(x.id.rsplit(KEY_MARK, 1)[0] for items in rankings.values() for x in items[:ASKED_PEEK]))
        return frozenset(u.id for u in self.units.get(user, ids) if asked_only(u))

    def _rank(
        self, user: Scope, query: str, where: SearchFilter
    ) -> tuple[tuple[dict[str, list[Scored]], dict[str, float]], frozenset[str]]:
        """Each retriever's candidates with its relevance floor, and which of the first are rounds
        in which the user only asked (see ``_asked``)."""
        s = self.settings
        rankings: dict[str, list[Scored]] = {}
        floors: dict[str, float] = {}
        keyword = None
        if s.method in ("hybrid", "bm25"):
            # the keyword search (database work) runs while the query is embedded (model work):
            # both release the GIL, so a hybrid query costs about the slower of the two
            # a question about now also looks for the words that say its kind of fact changed
            # ("现在住在哪" finds "从上海搬到深圳了": ``changes``)
            words = f"{query} {change_words(query)}" if s.change_words and asks_about_now(query) else query
            keyword = _POOL.submit(self.units.keyword_search, user, words, k=s.candidates, where=where)
            floors["bm25"] = s.bm25_floor
        if s.method in ("hybrid", "dense"):
            qv = self.embedder.embed_query(query)
            found = self.vectors.search(user, qv, k=s.candidates * (4 if s.keys or s.feedback else 1), where=where)
            if s.cross_margin is not None and found:
                found = self._across(user, query, qv, found)
            rankings["dense"] = [x for x in found if KEY_MARK not in x.id][: s.candidates]
            floors["dense"] = self._background_score(qv) + s.dense_margin
            if s.keys:
                rankings["keys"] = _best_of_units([x for x in found if KEY_MARK in x.id])[: s.candidates]
                floors["keys"] = floors["dense"]
        if keyword is not None:
            rankings = {"bm25": keyword.result(), **rankings}
        asked = self._asked(user, rankings)
        if s.method in ("hybrid", "dense") and s.feedback > 0 and found:
            feedback = self._feedback(user, qv, found, (rankings, floors), s.dense_margin, asked)
            if feedback:
                rankings["feedback"], floors["feedback"] = feedback
                asked |= self._asked(user, {"feedback": rankings["feedback"]})
        return (rankings, floors), asked

    def _relaxed(
        self, ranked: tuple[dict[str, list[Scored]], dict[str, float]], query: str, asked: frozenset[str] = frozenset()
    ) -> tuple[dict[str, list[Scored]], dict[str, float]]:
        """The vector floors at ``self_margin`` for a first-person question that nothing passed
        at the usual margin, or only rounds in which the user asked it before (nothing to relax
        otherwise). Only then: a lower floor in every search lets weak vector matches outvote a
        strong keyword match (MemoryBank-CN R@1 .73 -> .49 with 0.005 everywhere). A list whose
        best candidate (not an ``asked`` one) passes the lower floor also lets through what
        scores within ``self_band`` of it: two rounds the user said of themself ("我叫陈思，在上海
        做后端开发", later "我已经从上海搬到深圳了") sit that close under "我住在哪里？", and the
        later one must come too."""
        rankings, floors = ranked
        s = self.settings
        delta = s.dense_margin - s.self_margin
        if delta <= 0 or not first_person(query):
            return rankings, floors
        out = dict(floors)
        for name in ("dense", "keys"):
            if name not in floors:
                continue
            low = floors[name] - delta
            best = next((x.score for x in rankings.get(name, ()) if x.id not in asked), None)
            out[name] = min(low, best - s.self_band) if best is not None and best >= low else low
        return rankings, out

    def _feedback(
        self,
        user: Scope,
        qv: np.ndarray,
        pool: Sequence[Scored],
        ranked: tuple[dict[str, list[Scored]], dict[str, float]],
        margin: float,
        asked: frozenset[str] = frozenset(),
    ) -> tuple[list[Scored], float] | None:
        """The vector search's pool (units and keys) re-scored against the query moved toward the
        first relevant candidates (query + ``feedback_weight`` x their mean vector), as units,
        with its relevance floor: the moved query's own background score plus ``margin`` (the
        moved query is closer to everything, so the plain query's floor would pass all of the
        pool); None when no candidate is relevant. Re-scoring the pool, not searching the index
        again, keeps it to one vector search per query (same recall on the three development sets).
        Rounds in which the user only asked (``asked``) are not seeds: they would move the query
        toward its own words."""
        first = [f.id for f in self._relevant(ranked, asked=asked) if f.id not in asked][: self.settings.feedback]
        if not first:
            return None
        vectors = self.vectors.fetch(user, list(dict.fromkeys([*first, *(x.id for x in pool)])))
        seeds = [vectors[i] for i in first if i in vectors]
        ids = [x.id for x in pool if x.id in vectors]
        if not seeds or not ids:
            return None
        moved = np.asarray(qv, dtype=np.float32) + self.settings.feedback_weight * np.mean(seeds, axis=0)
        moved /= np.linalg.norm(moved)
        cosines = np.stack([vectors[i] for i in ids]) @ moved
        found = _best_of_units([Scored(i, min(1.0, max(0.0, (1.0 + float(c)) / 2.0))) for i, c in zip(ids, cosines.tolist(), strict=True)])
        return found[: self.settings.candidates], self._background_score(moved) + margin

    def _relevant(
        self,
        ranked: tuple[dict[str, list[Scored]], dict[str, float]],
        *,
        floors: bool = True,
        extra: dict[str, list[Scored]] | None = None,
        asked: frozenset[str] = frozenset(),
    ) -> list[Fused]:
        """The rankings fused, each cut at its relevance floor (``extra`` lists are not cut); the
        ``asked`` ids do not set the bar of the relative cut (see ``support``)."""
        rankings, limits = ranked
        cut = floors and self.settings.relevance_floor
        if not cut:
            limits = {}
        kept = {name: [x for x in items if name not in limits or x.score >= limits[name]] for name, items in rankings.items()}
        lists = {**kept, **(extra or {})}
        fused = rrf(lists, weights=dict(self.settings.weights))
        strength = support(lists, limits, asked)
        fused = [replace(f, support=strength.get(f.id, 0.0)) for f in fused]
        if cut and self.settings.relative_cut > 0:
            fused = [f for f in fused if f.support >= self.settings.relative_cut]
        return fused

    def _background_score(self, qv: np.ndarray, lang: str | None = None) -> float:
        """The query's best similarity to unrelated background text (``lang``: in that language
        only), as a [0, 1] score."""
        if self._background is None:
            self._background = self.embedder.embed_documents(BACKGROUND)
        rows = self._background if lang is None else self._background[[i for i, text in enumerate(BACKGROUND) if language(text) == lang]]
        cos = float(np.max(rows @ np.asarray(qv, dtype=np.float32)))
        return (1.0 + cos) / 2.0

    def _across(self, user: Scope, query: str, qv: np.ndarray, found: list[Scored]) -> list[Scored]:
        """The vector candidates with those in the other language than the query's moved by the
        difference of their floors (see ``SearchSettings.cross_margin``), best first: a candidate
        passes the query's floor exactly when it beats the background of its own language by
        the cross-language margin, and ranks by how far it does. Candidates in the query's
        language keep their scores (a memory in one language, asked in it, ranks as before)."""
        asked = language(query)
        ids = list(dict.fromkeys(x.id.rsplit(KEY_MARK, 1)[0] for x in found))
        other = {u.id for u in self.units.get(user, ids) if language(u.text) != asked}
        if not other:
            return found
        lang = "en" if asked == "zh" else "zh"
        shift = (self._background_score(qv) + self.settings.dense_margin) - (
            self._background_score(qv, lang) + (self.settings.cross_margin or 0.0)
        )
        moved = [Scored(x.id, min(1.0, x.score + shift)) if x.id.rsplit(KEY_MARK, 1)[0] in other else x for x in found]
        return sorted(moved, key=lambda x: -x.score)

    # ---- units -------------------------------------------------------------------------------

    def _hydrate(self, user: Scope, fused: Sequence[Fused], *, assistant_weight: float = 1.0) -> list[Hit]:
        by_id = {u.id: u for u in self.units.get(user, [f.id for f in fused])}
        ties = {f.id: (-f.scores.get("dense", -1.0), -f.scores.get("bm25", -1.0)) for f in fused}
        hits = [
            Hit(by_id[f.id], f.score * (assistant_weight if assistant_only(by_id[f.id]) else 1.0), dict(f.ranks))
            for f in fused
            if f.id in by_id
        ]
        # equal fused scores: the closer meaning, then the stronger keyword match, then the newer
        return sorted(hits, key=lambda h: (-round(h.score, 9), *ties[h.unit.id], -h.unit.timestamp.timestamp(), h.unit.id))


#: fused candidates hydrated (at least; 2 x k when more): the first k results are in the same
#: order for every k up to half of it
MIN_HYDRATED = 50
#: the first candidates of each list looked at for rounds in which the user only asked
ASKED_PEEK = 5


def support(lists: dict[str, list[Scored]], floors: dict[str, float], asked: frozenset[str] = frozenset()) -> dict[str, float]:
    """Each candidate's best standing in [0, 1] over the lists that hold it: (score - floor) /
    (best - floor) in each list, the floor 0 for a list without one (the list's best: 1). The
    best is that of the candidates not in ``asked`` (when the list has one): a round in which the
    user only asked repeats the question's words and would set a bar that the round holding the
    answer does not reach."""
    out: dict[str, float] = {}
    for name, items in lists.items():
        if not items:
            continue
        floor = min(floors.get(name, 0.0), min(x.score for x in items))
        best = max((x.score for x in items if x.id not in asked), default=max(x.score for x in items))
        for x in items:
            share = 1.0 if best <= floor else min(1.0, (x.score - floor) / (best - floor))
            out[x.id] = max(out.get(x.id, 0.0), share)
    return out


#: words that ask about the present state of things
_NOW = re.compile(
    r"现在|目前|眼下|如今|当前|最后|最新|还在|仍然|依然|\b(?:now|currently|current|these days|nowadays|still|at the moment|latest)\b",
    re.IGNORECASE,
)


def asks_about_now(query: str) -> bool:
    """Whether the question asks how things stand now ("我现在住在哪里？", "Do I still ...?")."""
    return bool(_NOW.search(query))


def newest_on_subject(hits: Sequence[Hit], window: int, later: Sequence[Hit] = (), *, asked: bool = True, changed: str = "") -> list[Hit]:
    """The newest round on the best hit's subject first, then the best hit and the others in
    their order. On the subject: among the first ``window`` hits or the ``later`` ones, sharing a
    content word with the best hit ("上海" in "我住在上海" and "我已经从上海搬到深圳了"). Of two
    rounds on one subject, the later says how things stand now (a move, a new job, a new date);
    the earlier stays right behind it, as the past. With ``asked``, a round in which the user
    only asked (see ``asked_only``) is neither the best hit nor the newest: the assistant's
    answer in it is not how things stand ("根据你之前告诉我的，你住在上海" after the move).
    ``changed``: the words that say the question's kind of fact changed (``changes``); a round
    whose user says one of them is on the subject too, though it shares no word with the best
    hit ("I moved to Denver last month" after "I live in Boston", asked "我现在住在哪个城市？")."""
    if not hits:
        return []

    def answered(h: Hit) -> bool:
        return not (asked and asked_only(h.unit))

    anchor = next((h for h in hits if answered(h)), None)
    if anchor is None:
        return list(hits)
    subject = subject_terms(anchor.unit)
    same = [
        anchor,
        *(
            h
            for h in [*hits[:window], *later]
            if h is not anchor and answered(h) and (subject & subject_terms(h.unit) or says_changed(h.unit, changed))
        ),
    ]
    newest = max(same, key=lambda h: h.unit.timestamp)
    return [newest, *(h for h in hits if h.unit.id != newest.unit.id)]


def says_changed(unit: Unit, changed: str) -> bool:
    """Whether the user's own words in the unit say one of ``changed`` (space-separated; an
    English one as a whole word, any case)."""
    if not changed:
        return False
    said = own_text(unit, without=ASSISTANT_LABELS)
    return any((re.search(rf"\b{re.escape(w)}\b", said, re.IGNORECASE) is not None) if w.isascii() else w in said for w in changed.split())


def without_repeats(hits: Sequence[Hit]) -> list[Hit]:
    """The hits without those whose whole text the hits before them already show: a round that
    a better hit carries as its lead-in, a chunk inside another. Such a hit adds nothing to the
    rendered context (it merges into what is there) and would only take a place of the k.
    Compared by the units' spans (message id and characters); a unit without spans is kept.
    LoCoMo dev R@10 .776 -> .781 at 596 tokens (short turns, each led in by the one before)."""
    shown: dict[str, list[tuple[int, int]]] = {}
    out = []
    for h in hits:
        parts = [(str(mid), offset, offset + end - start) for mid, _seq, _label, offset, start, end in h.unit.metadata.get("spans") or []]
        if parts and all(any(a <= lo and hi <= b for a, b in shown.get(mid, ())) for mid, lo, hi in parts):
            continue
        for mid, lo, hi in parts:
            shown.setdefault(mid, []).append((lo, hi))
        out.append(h)
    return out


def answers_first(hits: Sequence[Hit], share: float) -> list[Hit]:
    """Each hit that ends with a question someone other than the user asked, with the hit that answers it (the
    round led in by that question) moved right before it when that one scores at least ``share``
    of it. What a user answered is the memory; the question only names its subject."""
    out = list(hits)
    answer_of = {}
    for h in out:
        lead = (h.unit.metadata.get("lead") or {}).get("id")
        if lead:
            answer_of.setdefault(lead, h.unit.id)
    i = 0
    while i < len(out):
        asked = closing_question(out[i].unit)
        answer = answer_of.get(asked) if asked else None
        j = next((n for n in range(i + 1, len(out)) if out[n].unit.id == answer), None)
        if j is not None and out[j].score >= share * out[i].score:
            out.insert(i, out.pop(j))
            i += 1
        i += 1
    return out


def closing_question(unit: Unit) -> str | None:
    """The id of the unit's last message when it ends with a question that the user did not ask
    (the assistant did, or a named speaker of a conversation between people); else None."""
    spans = unit.metadata.get("spans") or []
    if not spans:
        return None
    mid, _seq, label, _off, start, end = spans[-1]
    if label in USER_LABELS or not ASKS.search(unit.text[start:end].strip()):
        return None
    return str(mid)


def subject_terms(unit: Unit) -> set[str]:
    """The content words of a unit's own text (search terms of two characters or more), without
    its lead-in and without the speakers' names and labels ("Caroline" is in every round of a
    conversation with Caroline and says nothing of its subject)."""
    names = {t for span in unit.metadata.get("spans") or [] for t in segment(str(span[2]))} | _label_terms()
    return {t for t in segment(own_text(unit)) if len(t) >= 2 and t not in names}


@functools.cache
def _label_terms() -> frozenset[str]:
    """The speaker labels' search terms, segmented on first use: at import the segmenter's
    dictionary (about a second to load) would be paid by every process, even one that never
    searches (a CLI ``add``)."""
    return frozenset(t for labels in LABELS.values() for label in labels.values() for t in segment(label))


def assistant_only(unit: Unit) -> bool:
    """Whether the unit holds only the assistant's words (by its roles, else its speaker labels)."""
    roles = unit.metadata.get("roles")
    if roles is not None:
        return list(roles) == ["assistant"]
    spans = unit.metadata.get("spans") or []
    return bool(spans) and all(span[2] in ASSISTANT_LABELS for span in spans)


#: runs keyword searches beside the query embedding (see ``_rank``)
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memstack-search")


def _best_of_units(found: Sequence[Scored]) -> list[Scored]:
    """Unit and sentence-key hits as one ranking of units, each at its best score (ties keep
    their order)."""
    out: dict[str, Scored] = {}
    for x in sorted(found, key=lambda x: -x.score):
        parent = x.id.rsplit(KEY_MARK, 1)[0] if KEY_MARK in x.id else x.id
        if parent not in out:
            out[parent] = Scored(parent, x.score)
    return list(out.values())


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


def _earlier(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


#: Everyday text about nothing in particular, in both languages: a query's similarity to these is
#: what "unrelated" looks like for the embedder in use.
BACKGROUND: list[str] = [
    "今天天气不错，出去走走吧。",
    "好的，谢谢你。",
    "这个问题我需要再想一想。",
    "我们明天再聊。",
    "你好，很高兴认识你。",
    "最近有点忙，没什么特别的事情。",
    "嗯嗯，我知道了。",
    "这件事情说来话长。",
    "The weather is nice today.",
    "Thanks, that sounds good.",
    "Let me think about it for a moment.",
    "See you tomorrow.",
    "Hello, nice to meet you.",
    "Nothing much happened this week.",
    "Okay, got it.",
    "It's a long story.",
]
