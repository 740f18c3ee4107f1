"""The answer benchmark: does a chat model, given memstack's context, answer the user's question right?

Each system under test ingests a benchmark's conversations as a user's app would (``Memory.add``
per session with the sessions' dates, its preset or stack with the model-backed layers, the write
queue drained by the worker), then every question is asked at its reference time in a new thread:
``Memory.context(query=..., at=..., max_tokens=...)`` goes to the chat model after one fixed
answering instruction (Chinese for Chinese data), and the answer is judged.

Baselines run in the same pass on the same model and questions: ``none`` (the question alone),
``full`` (the whole history, the newest turns that fit the model's window, in time order) and
``oracle`` (only the evidence turns: the model's reading ceiling, so the gap to it is memory's own).

Judges (``judge_answer``): a question's ``answer_keywords`` when it has them (one alternative of
every entry contained, case, spaces and full/half width ignored); else, for a short gold answer
(its explanatory remarks in parentheses left out), containment of it; else the share of the gold
answer's tokens the answer holds, the question's own words left out of both (an answer that only
echoes the question earns nothing), at least ``RECALL_CORRECT``. Token F1 (LoCoMo's, characters
for Chinese) is reported beside. With ``judge=`` a chat model also grades each answer with the
strict prompt of ``JUDGE_PROMPT``, and its verdict is the accuracy.
"""

from __future__ import annotations

import functools
import re
import statistics
import string
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import InvalidInput, MemstackError
from ..llm import ChatModel, get_chat_model
from ..llm.structured import generate
from ..memory import Memory
from ..presets import preset_named
from ..retrieval.render import date_line
from ..retrieval.units import LABELS, language
from ..tokens import get_counter
from .datasets import Conversation, Question, Session, load
from .recall import ingest

BASELINES = ("none", "full", "oracle")
#: tokens the model may answer with
ANSWER_TOKENS = 96
#: a gold answer this short (words, or characters of Chinese) is judged by containment
SHORT_WORDS = 6
SHORT_CJK_CHARS = 12
RECALL_CORRECT = 0.6
#: what context sizes are reported in, for memory systems and baselines alike (Memory's default)
DEFAULT_COUNTER = get_counter()
THREADS = ("new", "last")
#: what of each conversation is ingested: every session, or only those that hold a question's
#: evidence (LongMemEval's "oracle" setting; what a model-backed write side can read on a CPU)
SESSIONS = ("all", "evidence")

INSTRUCTIONS = {
    "zh": (
        "你是用户的私人助手，和用户有过多次对话。系统消息中是你记得的与用户有关的历史对话和记忆（可能为空）。"
        "今天是{date}。请根据这些记忆回答用户的问题：直接给出答案，一两句话，不要解释推理过程；"
        "同一件事如果后来有变化，以最新的说法为准；问到时间时，把“上周六”“下周三”之类换算成具体日期；"
        "记忆中没有相关信息时，回答“我不知道”。"
    ),
    "en": (
        "You are the user's personal assistant and have talked with them before. The system messages hold what you "
        "remember of earlier conversations (possibly nothing). Today is {date}. Answer the user's question from that "
        "memory: give the answer directly, in one or two sentences, without explaining your reasoning; when something "
        'changed later, give the latest value; when asked about time, turn relative dates ("last Saturday") into '
        'calendar dates; when the memory holds nothing relevant, say "I don\'t know".'
    ),
}

JUDGE_PROMPT = (
    "You grade an answer to a question about a user's earlier conversations against the gold answer. "
    "The answer is CORRECT only if it states the same fact as the gold answer: the same entity, number, date, place "
    "or set of items (other wording, another language or extra detail that agrees with the gold answer are fine). "
    "It is WRONG if it gives another value, only part of what the gold answer requires, several alternatives "
    'without committing to the gold one, a refusal or "I don\'t know", or a date or number that differs. '
    "Do not give credit for being close or on topic.\n\n"
    "Question: {question}\nGold answer: {gold}\nAnswer to grade: {answer}\n\n"
    'Reply with JSON: {{"correct": true}} or {{"correct": false}}.'
)


class Verdict(BaseModel):
    correct: bool


@dataclass(frozen=True, slots=True)
class System:
    """One system under test: a memory stack (a preset or layers) or a baseline."""

    name: str
    layers: tuple[str, ...] = ()
    preset: str | None = None
    baseline: str | None = None


def systems_for(presets: Sequence[str] = (), strategies: Sequence[str] = (), baselines: Sequence[str] = ()) -> list[System]:
    """The systems named on the command line, presets first, then stacks, then baselines."""
    out = [System(p, tuple(preset_named(p).layers), preset=p) for p in presets]
    out += [System(s, tuple(x.strip() for x in s.split(",") if x.strip())) for s in strategies]
    for b in baselines:
        if b not in BASELINES:
            raise InvalidInput(f"unknown baseline {b!r}; expected any of {', '.join(BASELINES)}", field="baselines")
        out.append(System(b, baseline=b))
    if not out:
        raise InvalidInput("name at least one preset, strategy or baseline", field="preset")
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise InvalidInput(f"a system is named twice: {', '.join(names)}", field="preset")
    return out


# ---- judging -------------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """Case-folded, full-width to half-width (NFKC), all whitespace removed."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def _compact(text: str) -> tuple[str, frozenset[int]]:
    """``normalize_answer(text)`` and the positions in it where whitespace was taken out."""
    out: list[str] = []
    breaks = set()
    for i, piece in enumerate(unicodedata.normalize("NFKC", text).casefold().split()):
        if i:
            breaks.add(sum(map(len, out)))
        out.append(piece)
    return "".join(out), frozenset(breaks)


def _latin(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


#: what an English word of three letters or more may end with and stay itself ("swim" in "swimming",
#: "quit" in "quitting", "back" in "backs"): a doubled last consonant before -ing/-ed, -s, -es, -d
_INFLECTION = re.compile(r"(?P<twin>[a-z])?(?:ing|ed)|e?s|d")


def _inflected(part: str, got: str, end: int, breaks: frozenset[int]) -> bool:
    """Whether ``got`` continues the Latin word ``part`` at ``end`` with only an inflection."""
    if len(part) < 3 or not part.isascii() or not part[-3:].isalpha():
        return False
    stop = end
    while stop < len(got) and _latin(got[stop]) and (stop == end or stop not in breaks):
        stop += 1
    m = _INFLECTION.fullmatch(got, end, stop)
    return m is not None and m.group("twin") in (None, part[-1])


def contains(answer: str, part: str) -> bool:
    """Whether the normalised ``answer`` holds the normalised ``part``, a number only as a whole
    number ("7公里" is not in "增加了17公里", "3月1日" is not in "3月11日") and a Latin word only as a
    whole word or inflected ("swim" is in "swimming"; "go" is not in "going", "es" not in "uses";
    "7km" is in "7 km"): an English answer says the keyword's verb in its own tense."""
    got, breaks = _compact(answer)
    part = normalize_answer(part)
    if not part:
        return False
    start = got.find(part)
    while start >= 0:
        end = start + len(part)
        before = got[start - 1] if start > 0 and start not in breaks else ""
        after = got[end] if end < len(got) and end not in breaks else ""
        cut_number = (part[0].isdigit() and before.isdigit()) or (part[-1].isdigit() and after.isdigit())
        cut_word = (part[0].isascii() and part[0].isalpha() and _latin(before)) or (
            part[-1].isascii() and part[-1].isalpha() and _latin(after) and not _inflected(part, got, end, breaks)
        )
        if not cut_number and not cut_word:
            return True
        start = got.find(part, start + 1)
    return False


def keywords_match(answer: str, keywords: Sequence[str]) -> bool:
    """True when the answer contains one ``|``-alternative of every keyword entry (``contains``)."""
    return bool(keywords) and all(any(contains(answer, alt) for alt in entry.split("|")) for entry in keywords)


_CJK = re.compile(r"[\u3400-\u9fff]")
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def answer_tokens(text: str) -> list[str]:
    """LoCoMo's answer normalisation (lower case, no punctuation or articles), words split on
    spaces and every Chinese character a token of its own."""
    text = unicodedata.normalize("NFKC", text).lower().replace(",", "")
    text = "".join(" " if ch in string.punctuation or unicodedata.category(ch).startswith("P") else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    out: list[str] = []
    for word in text.split():
        out += [piece for piece in re.split(r"([\u3400-\u9fff])", word) if piece]
    return out


def token_f1(answer: str, gold: str) -> float:
    pred, ref = answer_tokens(answer), answer_tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def gold_recall(answer: str, gold: str, question: str = "") -> float:
    """The share of the gold answer's tokens the answer holds, tokens of the question left out of
    both (each gold token counted as often as the answer has it)."""
    asked = set(answer_tokens(question))
    ref = [t for t in answer_tokens(gold) if t not in asked]
    pred = Counter(t for t in answer_tokens(answer) if t not in asked)
    if not ref:
        return 0.0
    return sum((Counter(ref) & pred).values()) / len(ref)


def is_short(gold: str) -> bool:
    cjk = len(_CJK.findall(gold))
    return cjk <= SHORT_CJK_CHARS if cjk else len(gold.split()) <= SHORT_WORDS


_REMARK = re.compile(r"[（(][^（）()]*[）)]")
_REFUSAL = re.compile(
    r"我不知道|不清楚|没有(?:相关|具体)?的?(?:信息|记录|记忆)|不记得|"
    r"\bi (?:do not|don'?t) (?:know|remember|have (?:any |that |this )?(?:specific |such )?(?:information|record|memory|details))|\bno (?:information|record|memory) (?:about|of|on)\b",
    re.IGNORECASE,
)


def refusal(answer: str) -> bool:
    """An answer that says it does not know ("我不知道", "I don't have any information about ...")."""
    return bool(_REFUSAL.search(answer))


def judge_answer(question: Question, answer: str) -> dict[str, Any]:
    """The rule-based verdict: ``{"correct", "by", "f1"}`` (``by``: keywords, contains or recall)."""
    gold = question.answer or ""
    f1 = round(token_f1(answer, gold), 4) if gold else 0.0
    if question.keywords:
        return {"correct": keywords_match(answer, question.keywords), "by": "keywords", "f1": f1}
    if refusal(answer):  # however many of the gold answer's words it repeats
        return {"correct": False, "by": "refusal", "f1": f1}
    core = _REMARK.sub("", gold).strip() or gold  # "一个小时（在附近的公园慢跑）" -> "一个小时"
    if core and is_short(core):
        return {"correct": contains(answer, core), "by": "contains", "f1": f1}
    return {"correct": gold_recall(answer, core, question.text) >= RECALL_CORRECT, "by": "recall", "f1": f1}


def llm_verdict(judge: ChatModel, question: Question, answer: str) -> bool:
    prompt = JUDGE_PROMPT.format(question=question.text, gold=question.answer or "", answer=answer.strip() or "(no answer)")
    return generate(judge, [{"role": "user", "content": prompt}], Verdict, max_tokens=16).value.correct


# ---- contexts ------------------------------------------------------------------------------------


def instruction(lang: str, at: datetime) -> dict[str, str]:
    """The one fixed answering instruction, dated at the question's reference time."""
    return {"role": "system", "content": INSTRUCTIONS[lang].format(date=date_line(at, lang).strip("[]"))}


def render_turns(turns: Sequence[tuple[Session, Any]], lang: str) -> str:
    """Turns as the baselines show them: one date line per session day, then "speaker: text"."""
    labels = LABELS[lang]
    lines: list[str] = []
    day = None
    for session, turn in turns:
        if date_line(session.date, lang) != day:
            day = date_line(session.date, lang)
            lines.append(day)
        lines.append(f"{turn.name or labels.get(turn.role, turn.role)}: {turn.text}")
    return "\n".join(lines)


def baseline_messages(
    kind: str, conv: Conversation, q: Question, lang: str, room: int, count: Callable[[str], int]
) -> list[dict[str, str]]:
    """The memory message of a baseline: none, the evidence turns (oracle), or the newest turns
    of the whole history that fit ``room`` tokens of the model (full), in time order."""
    turns = [(s, t) for s in sorted(conv.sessions, key=lambda s: s.date) for t in s.turns if s.date <= q.at]
    if kind == "none":
        return []
    if kind == "oracle":
        turns = [(s, t) for s, t in turns if t.key in q.evidence]
    else:
        kept: list[tuple[Session, Any]] = []
        used = 0
        for s, t in reversed(turns):
            cost = count(t.text) + 8
            if used + cost > room:
                break
            kept.insert(0, (s, t))
            used += cost
        turns = kept
    header = "以下是与用户的历史对话：" if lang == "zh" else "Earlier conversations with the user:"
    return [{"role": "system", "content": header + "\n" + render_turns(turns, lang)}] if turns else []


# ---- the run -------------------------------------------------------------------------------------


@dataclass
class _Tally:
    """What one system did over a run, for its report row."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    ingest_seconds: float = 0.0
    write_prompt_tokens: int = 0
    write_completion_tokens: int = 0
    write_calls: int = 0
    failed_jobs: int = 0
    turns: int = 0


def run(
    dataset: str,
    path: str | Path,
    systems: Sequence[System],
    *,
    model: str | ChatModel | None = None,
    judge: str | ChatModel | None = None,
    max_tokens: int = 1200,
    limit: int | None = None,
    per_type: int | None = None,
    only: Sequence[str] = (),
    reuse: str | Path | None = None,
    embedder: str | None = None,
    thread: str = "new",
    translated: bool = False,
    sessions: str = "all",
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Ingest, ask, answer and judge every question for every system; returns the report.

    ``thread``: ask in a new thread (a later session: what memory carries across sessions) or in
    the thread of the last session before the question (a conversation that goes on).
    ``translated``: ask each question in its other language (the fact set has both), so English
    questions meet Chinese memory and Chinese questions English memory.
    ``sessions``: ``evidence`` ingests only the sessions that hold the asked questions' evidence
    (each LongMemEval haystack is ~500 turns, hours of model-backed writing per question type on
    two cores; its evidence sessions are 2 to 53 turns), so the stacks still choose among whole
    sessions of distracting turns, but not among hundreds."""
    if thread not in THREADS:
        raise InvalidInput(f"thread must be one of {', '.join(THREADS)}", field="thread")
    if sessions not in SESSIONS:
        raise InvalidInput(f"sessions must be one of {', '.join(SESSIONS)}", field="sessions")
    conversations = _select(load(dataset, path, translated=translated), only, limit, per_type)
    if sessions == "evidence":
        conversations = [_evidence_sessions(c) for c in conversations]
    chat = get_chat_model(model)
    count = functools.lru_cache(maxsize=65536)(chat.count_tokens)
    grader = get_chat_model(judge) if judge is not None else None
    questions = sum(len(c.questions) for c in conversations)
    total = questions * len(systems)
    tallies = {s.name: _Tally() for s in systems}
    done = 0
    with tempfile.TemporaryDirectory(prefix="memstack-qa-") as tmp:
        folder = Path(reuse) if reuse else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for system in systems:
            db = folder / f"{dataset}{'-evidence' if sessions == 'evidence' else ''}-{_slug(system.name)}.db"
            memory = None if system.baseline else _memory(system, db, chat, embedder)
            try:
                for conv in conversations:
                    if memory is not None:
                        if progress is not None and hasattr(progress, "note"):
                            progress.note(
                                f"{dataset} {system.name}: ingesting {conv.id} ({sum(len(x.turns) for x in conv.sessions)} turns)"
                            )
                        _ingest(memory, conv, tallies[system.name], fresh=reuse is None)
                    for q in conv.questions:
                        tallies[system.name].rows.append(_ask(system, memory, conv, q, chat, count, grader, max_tokens, thread))
                        done += 1
                        if progress:
                            progress(done, total, f"{dataset} {system.name}: {_running(tallies[system.name])}")
            finally:
                if memory is not None:
                    memory.close()
    report = _report(dataset, systems, tallies, chat, grader, max_tokens, questions, thread)
    return {**report, "translated": translated, "sessions": sessions}


def _select(conversations: list[Conversation], only: Sequence[str], limit: int | None, per_type: int | None) -> list[Conversation]:
    """The conversations named by ``only`` (all by default), their questions cut to ``per_type``
    of each type and ``limit`` in all (in file order); conversations left without questions go."""
    chosen = [c for c in conversations if not only or c.id in only]
    if not chosen:
        raise InvalidInput(f"no conversation matches {', '.join(only)}", field="only")
    seen: Counter[str] = Counter()
    asked = 0
    out = []
    for c in chosen:
        keep = []
        for q in c.questions:
            if (limit is not None and asked >= limit) or (per_type is not None and seen[q.category] >= per_type):
                continue
            seen[q.category] += 1
            asked += 1
            keep.append(q)
        if keep:
            out.append(Conversation(c.id, c.sessions, tuple(keep)))
    if not out:
        raise InvalidInput("no question left to ask", field="limit")
    return out


def _evidence_sessions(conv: Conversation) -> Conversation:
    """The conversation with only the sessions that hold one of its questions' evidence turns."""
    keys = {k for q in conv.questions for k in q.evidence}
    return Conversation(conv.id, tuple(s for s in conv.sessions if any(t.key in keys for t in s.turns)), conv.questions)


def _memory(system: System, db: Path, chat: ChatModel, embedder: str | None) -> Memory:
    options: dict[str, Any] = {"model": chat}
    if embedder:
        options["embedder"] = embedder
    if system.preset:
        return Memory(db, preset=system.preset, options=options, max_tokens=None)
    return Memory(db, layers=list(system.layers), options=options, max_tokens=None)


def _ingest(memory: Memory, conv: Conversation, tally: _Tally, *, fresh: bool) -> None:
    """Add the conversation's sessions (unless a reused store holds them) and drain the queue."""
    tally.turns += sum(len(s.turns) for s in conv.sessions)
    started = time.perf_counter()
    if fresh or not memory.threads(user_id=conv.id):
        ingest(memory, conv)
    report = memory.flush(user_id=conv.id)
    tally.ingest_seconds += time.perf_counter() - started
    tally.failed_jobs += report.failed
    for u in memory.usage(user_id=conv.id):
        tally.write_prompt_tokens += u.prompt_tokens
        tally.write_completion_tokens += u.completion_tokens
        tally.write_calls += 1


def _ask(
    system: System,
    memory: Memory | None,
    conv: Conversation,
    q: Question,
    chat: ChatModel,
    count: Callable[[str], int],
    grader: ChatModel | None,
    max_tokens: int,
    thread: str,
) -> dict[str, Any]:
    lang = language(q.text)
    head = instruction(lang, q.at)
    question = {"role": "user", "content": q.text}
    started = time.perf_counter()
    if memory is None:
        room = chat.context_window - ANSWER_TOKENS - count(head["content"] + q.text) - 64
        memories = baseline_messages(system.baseline or "none", conv, q, lang, room, count)
        messages = [head, *memories, question]
        context_tokens = sum(DEFAULT_COUNTER.count(m["content"]) for m in memories)
    else:
        ctx = memory.context(user_id=conv.id, thread_id=_thread_of(conv, q, thread), query=q.text, at=q.at, max_tokens=max_tokens)
        messages = [head, *ctx.to_openai()]
        context_tokens = ctx.tokens - ctx.sections.get("query", 0)
    context_ms = (time.perf_counter() - started) * 1000
    row: dict[str, Any] = {
        "id": q.id,
        "type": q.category,
        "question": q.text,
        "gold": q.answer,
        "context_tokens": context_tokens,
        "context_ms": round(context_ms, 1),
    }
    try:
        completion = chat.complete(messages, temperature=0.0, max_tokens=ANSWER_TOKENS)
    except MemstackError as exc:  # an answer that failed is a wrong answer, with the reason kept
        row.update(
            {
                "answer": "",
                "error": f"{type(exc).__name__}: {exc}",
                "correct": False,
                "by": "error",
                "f1": 0.0,
                "answer_ms": 0.0,
                "prompt_tokens": 0,
            }
        )
        return row
    answer = completion.text.strip()
    row.update(
        {
            "answer": answer,
            "answer_ms": round(completion.latency_ms, 1),
            "prompt_tokens": completion.prompt_tokens,
            **judge_answer(q, answer),
        }
    )
    if grader is not None:
        try:
            row["judge"] = llm_verdict(grader, q, answer)
        except MemstackError as exc:
            row["judge"] = None
            row["judge_error"] = f"{type(exc).__name__}: {exc}"
    return row


def _thread_of(conv: Conversation, q: Question, thread: str) -> str:
    if thread == "last":
        said = [s for s in conv.sessions if s.turns and s.date <= q.at]
        if said:
            return max(said, key=lambda s: s.date).id
    return "bench-qa"


def _running(t: _Tally) -> str:
    return f"{sum(r['correct'] for r in t.rows)}/{len(t.rows)} right"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


# ---- the report ----------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def _accuracy(rows: Sequence[dict[str, Any]], grader: bool) -> float:
    if grader:
        return _mean([float(bool(r.get("judge"))) for r in rows])
    return _mean([float(r["correct"]) for r in rows])


def _report(
    dataset: str,
    systems: Sequence[System],
    tallies: dict[str, _Tally],
    chat: ChatModel,
    grader: ChatModel | None,
    max_tokens: int,
    questions: int,
    thread: str,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "dataset": dataset,
        "model": chat.name,
        "judge": grader.name if grader else "rules",
        "max_tokens": max_tokens,
        "thread": thread,
        "questions": questions,
        "systems": {},
    }
    for s in systems:
        t = tallies[s.name]
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in t.rows:
            by_type[r["type"]].append(r)
        tokens = [r["context_tokens"] for r in t.rows]
        out["systems"][s.name] = {
            "kind": "baseline" if s.baseline else "memory",
            "layers": list(s.layers),
            "accuracy": _accuracy(t.rows, grader is not None),
            "rule_accuracy": _accuracy(t.rows, False),
            "f1": _mean([r["f1"] for r in t.rows]),
            "by_type": {k: _accuracy(v, grader is not None) for k, v in sorted(by_type.items())},
            "context_tokens": {"mean": round(_mean(tokens), 1), "p95": _p95(tokens)},
            "answer_ms": {
                "p50": round(statistics.median([r["answer_ms"] for r in t.rows]), 1) if t.rows else 0.0,
                "mean": round(_mean([r["answer_ms"] for r in t.rows]), 1),
            },
            "context_ms": {"p50": round(statistics.median([r["context_ms"] for r in t.rows]), 1) if t.rows else 0.0},
            "ingest_seconds": round(t.ingest_seconds, 1),
            "write_tokens": {
                "prompt": t.write_prompt_tokens,
                "completion": t.write_completion_tokens,
                "calls": t.write_calls,
                "per_turn": round((t.write_prompt_tokens + t.write_completion_tokens) / t.turns, 1) if t.turns else 0.0,
            },
            "failed_jobs": t.failed_jobs,
            "errors": sum(1 for r in t.rows if r.get("error")),
            "answers": t.rows,
        }
    oracle = out["systems"].get("oracle")
    if oracle and oracle["accuracy"]:
        for row in out["systems"].values():
            row["of_oracle"] = round(row["accuracy"] / oracle["accuracy"], 3)
    return out


def format_report(report: dict[str, Any]) -> str:
    """A markdown table: a row per system, overall accuracy, by question type, tokens, costs."""
    systems = report["systems"]
    types = sorted({t for s in systems.values() for t in s["by_type"]})
    lines = [
        f"{report['dataset']}: {report['questions']} questions, model {report['model']}, judge {report['judge']}, max_tokens {report['max_tokens']}"
        + (", questions translated" if report.get("translated") else "")
        + (", only the sessions that hold evidence ingested" if report.get("sessions") == "evidence" else "")
    ]
    head = [
        "system",
        "accuracy",
        "of oracle",
        *types,
        "F1",
        "context tokens (mean / p95)",
        "write tokens per turn",
        "ingest s",
        "answer ms p50",
    ]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for name, s in systems.items():
        cells = [
            name,
            f"{s['accuracy']:.3f}",
            f"{s['of_oracle']:.2f}" if "of_oracle" in s else "",
            *(f"{s['by_type'][t]:.2f}" if t in s["by_type"] else "" for t in types),
            f"{s['f1']:.3f}",
            f"{s['context_tokens']['mean']:.0f} / {s['context_tokens']['p95']:.0f}",
            f"{s['write_tokens']['per_turn']:.0f}" if s["kind"] == "memory" else "",
            f"{s['ingest_seconds']:.0f}" if s["kind"] == "memory" else "",
            f"{s['answer_ms']['p50']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [
        f"{n}: {s['failed_jobs']} failed write jobs, {s['errors']} failed answers"
        for n, s in systems.items()
        if s["failed_jobs"] or s["errors"]
    ]
    return "\n".join(lines + failed)
