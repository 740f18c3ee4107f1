"""Loading memory benchmarks (LoCoMo, LongMemEval, MemoryBank-CN, the project's fact set) into one shape.

Each loader turns a file of that benchmark's format (``.json`` or ``.json.gz``) into
Conversations: a user's dated sessions of messages, each message tagged with the benchmark's turn
key, and the questions about them with the turn keys that hold the evidence and the reference
time to ask them at. Nothing here touches memstack's stores.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from .facts import FactConversation, load_facts

DATASETS = ("locomo", "longmemeval", "memorybank-cn", "facts")


@dataclass(frozen=True, slots=True)
class Turn:
    key: str
    role: str
    text: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    date: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    evidence: frozenset[str]
    category: str
    at: datetime
    answer: str | None = None
    #: answer keywords: each entry a "|"-separated set of alternatives, one of which a correct
    #: answer contains (MemoryBank-CN format's optional ``answer_keywords``)
    keywords: tuple[str, ...] = ()
    #: the same question in another language, where the data set gives one (``translated``)
    translation: str | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...] = field(default_factory=tuple)


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from exc


def load(dataset: str, path: str | Path | None, *, translated: bool = False) -> list[Conversation]:
    """The conversations of a benchmark file (for ``facts``, a directory of them or None for the
    checkout's own); ``translated``: each question asked in its other language (questions without
    a translation left out), to measure cross-lingual search."""
    loaders = {"locomo": load_locomo, "longmemeval": load_longmemeval, "memorybank-cn": load_memorybank}
    if dataset != "facts" and dataset not in loaders:
        raise InvalidInput(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}", field="dataset")
    if dataset == "facts":
        out = from_facts(load_facts(path))
    elif path is None:
        raise InvalidInput(f"give the {dataset} file", field="data")
    else:
        try:
            out = loaders[dataset](read_json(path))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(f"{path} is not a {dataset} file: {type(exc).__name__}: {exc}") from exc
    if translated:
        out = [
            Conversation(c.id, c.sessions, tuple(replace(q, text=q.translation, translation=q.text) for q in c.questions if q.translation))
            for c in out
        ]
        if not any(c.questions for c in out):
            raise InvalidInput(f"no question of {dataset} has a translation", field="translated")
    return out


# ---- LoCoMo -----------------------------------------------------------------------------------

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def locomo_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> a UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def locomo_evidence(items: list[str]) -> frozenset[str]:
    """Normalise evidence ids ('D8:6; D9:17', 'D:11:26') to 'D<session>:<turn>' keys."""
    return frozenset(f"D{s}:{t}" for item in items for s, t in _DIA.findall(str(item)))


def _locomo_turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def load_locomo(data: list[dict[str, Any]]) -> list[Conversation]:
    """Both speakers are people: each turn is a user message carrying the speaker's name."""
    out = []
    for sample in data:
        conv = sample["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        sessions = []
        for n in numbers:
            turns = tuple(
                Turn(next(iter(locomo_evidence([t["dia_id"]])), t["dia_id"]), "user", _locomo_turn_text(t), t["speaker"])
                for t in conv[f"session_{n}"]
                if _locomo_turn_text(t)
            )
            sessions.append(Session(f"session_{n}", locomo_date(conv[f"session_{n}_date_time"]), turns))
        last = max(s.date for s in sessions)
        questions = tuple(
            Question(
                f"{sample['sample_id']}#{i}",
                q["question"],
                locomo_evidence(q.get("evidence", [])),
                LOCOMO_CATEGORIES[int(q["category"])],
                last + timedelta(days=1),
                str(q.get("answer", "")) or None,
            )
            for i, q in enumerate(sample["qa"])
            if int(q["category"]) != 5
        )
        out.append(Conversation(sample["sample_id"], tuple(sessions), tuple(q for q in questions if q.evidence)))
    return out


# ---- LongMemEval ------------------------------------------------------------------------------


def longmemeval_date(text: str) -> datetime:
    """'2023/07/31 (Mon) 11:43' -> a UTC datetime."""
    return datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", text).strip(), "%Y/%m/%d %H:%M").replace(tzinfo=timezone.utc)


def load_longmemeval(data: list[dict[str, Any]]) -> list[Conversation]:
    """One conversation per question: its haystack of sessions; evidence = turns with has_answer."""
    out = []
    for q in data:
        if str(q["question_id"]).endswith("_abs"):
            continue
        sessions = []
        evidence = set()
        for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True):
            keyed = []
            for i, t in enumerate(turns):
                key = f"{sid}#{i}"
                if t.get("has_answer"):
                    evidence.add(key)
                if str(t.get("content", "")).strip():
                    keyed.append(Turn(key, t["role"], str(t["content"])))
            sessions.append(Session(sid, longmemeval_date(date), tuple(keyed)))
        sessions.sort(key=lambda s: s.date)
        question = Question(
            str(q["question_id"]),
            q["question"],
            frozenset(evidence),
            q["question_type"],
            longmemeval_date(q["question_date"]),
            str(q.get("answer", "")) or None,
        )
        out.append(Conversation(str(q["question_id"]), tuple(sessions), (question,) if evidence else ()))
    return out


# ---- MemoryBank-CN ----------------------------------------------------------------------------


def load_memorybank(data: dict[str, Any]) -> list[Conversation]:
    """One conversation per user; a day is a session; evidence 'DATE#INDEX' = that query/response pair."""
    by_user: dict[str, list[Question]] = {}
    out = []
    for user, days in data["histories"].items():
        sessions = []
        for day in sorted(days):
            date = datetime.fromisoformat(day).replace(hour=20, tzinfo=timezone.utc)
            turns: list[Turn] = []
            for i, pair in enumerate(days[day]):
                turns.append(Turn(f"{day}#{i}", "user", str(pair["query"])))
                if str(pair.get("response", "")).strip():
                    turns.append(Turn(f"{day}#{i}", "assistant", str(pair["response"])))
            sessions.append(Session(day, date, tuple(turns)))
        last = max(s.date for s in sessions)
        by_user[user] = []
        out.append((user, sessions, last))
    for i, q in enumerate(data["questions"]):
        if not q.get("answerable", True):
            continue
        user = q["user"]
        last = next(last for u, _, last in out if u == user)
        keywords = q.get("answer_keywords") or []
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise ValueError(f"question {i}: answer_keywords must be a list of strings")
        keywords = tuple(k for k in keywords if k.strip())
        by_user[user].append(
            Question(
                f"{user}#{i}",
                q["question"],
                frozenset(q["evidence"]),
                str(q.get("type", "")),
                last + timedelta(hours=2),
                str(q.get("answer", "")) or None,
                keywords,
            )
        )
    return [Conversation(user, tuple(sessions), tuple(by_user[user])) for user, sessions, _ in out]


# ---- the fact set (bench/data/facts) ------------------------------------------------------------

#: a fact set question is asked this long after the conversation's last turn
FACTS_ASKED_AFTER = timedelta(days=1)


def from_facts(conversations: list[FactConversation]) -> list[Conversation]:
    """One conversation per fact conversation, a day a session (the threads ``bench facts`` uses);
    a user turn and its reply share the key ``t<index>``, which the questions' evidence names."""
    out = []
    for c in conversations:
        index = {id(t): i for i, t in enumerate(c.turns)}
        sessions = tuple(
            Session(
                name,
                turns[0].at,
                tuple(Turn(f"t{index[id(t)]}", role, text) for t in turns for role, text in (("user", t.user), ("assistant", t.assistant))),
            )
            for name, turns in c.sessions()
        )
        at = c.turns[-1].at + FACTS_ASKED_AFTER
        questions = tuple(
            Question(f"{c.id}#{i}", q.text, frozenset(f"t{n}" for n in q.evidence), q.type, at, q.answer, q.keywords, q.translation)
            for i, q in enumerate(c.questions)
        )
        out.append(Conversation(c.id, sessions, questions))
    return out


def iter_questions(conversations: list[Conversation]) -> Iterator[tuple[Conversation, Question]]:
    for c in conversations:
        for q in c.questions:
            yield c, q
