"""The recall benchmark: ingest a benchmark's conversations through the public API, ask its
questions, and measure how much of the evidence the retrieved units cover, per token.

Recall@k of a question = the share of its evidence turns covered by the top k units (a unit covers
a turn when its text was taken from that turn); all_evidence@k = the share of questions with every
evidence turn covered; context_tokens@k = cl100k tokens of the retrieved context rendered exactly
as it would be injected; answer_in_context@k = the share of questions whose gold answer appears
verbatim in that text.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..memory import Memory
from ..retrieval.render import render_hits
from ..tokens import get_counter
from .datasets import Conversation, load

METHODS = ("default", "hybrid", "bm25", "dense")
DEFAULT_KS = (1, 5, 10, 20)


def ingest(memory: Memory, conv: Conversation) -> dict[str, str]:
    """Add a conversation's sessions as one user's threads (dates kept); message id -> turn key."""
    keys: dict[str, str] = {}
    for session in conv.sessions:
        batch = [
            {
                "role": t.role,
                "content": t.text,
                **({"name": t.name} if t.name else {}),
                "timestamp": (session.date + timedelta(seconds=i)).isoformat(),
            }
            for i, t in enumerate(session.turns)
        ]
        if not batch:
            continue
        stored = memory.add(batch, user_id=conv.id, thread_id=session.id)
        keys.update({m.id: t.key for m, t in zip(stored, session.turns, strict=True)})
    return keys


def stored_keys(memory: Memory, conv: Conversation) -> dict[str, str] | None:
    """The keys of a conversation already ingested into ``memory`` (a reused --db); None if not."""
    have = {t.thread_id for t in memory.threads(user_id=conv.id)}
    if not have or not all(s.id in have for s in conv.sessions if s.turns):
        return None
    keys: dict[str, str] = {}
    for session in conv.sessions:
        if session.turns:
            stored = memory.history(user_id=conv.id, thread_id=session.id)
            if len(stored) != len(session.turns):
                return None
            keys.update({m.id: t.key for m, t in zip(stored, session.turns, strict=True)})
    return keys


def _layer_options(method: str) -> dict[str, Any]:
    if method == "default":
        return {}
    return {"method": method, "baseline": True}


def run(
    dataset: str,
    path: str | Path,
    *,
    method: str = "default",
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    embedder: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    db: str | Path | None = None,
    only: Sequence[str] = (),
    translated: bool = False,
) -> dict[str, Any]:
    """Run the benchmark on a fresh SQLite store in a temporary directory, or on ``db``, where
    conversations already ingested by an earlier run are reused (only their queries run again);
    returns the report. ``translated``: each question in its other language, where the data set
    gives one (the fact set), for cross-lingual recall."""
    if method not in METHODS:
        raise InvalidInput(f"method must be one of {', '.join(METHODS)}", field="method")
    conversations = [c for c in load(dataset, path, translated=translated) if not only or c.id in only]
    if not conversations:
        raise InvalidInput(f"no conversation of {dataset} matches {', '.join(only)}", field="only")
    ks = sorted(set(ks))
    total = sum(len(c.questions) for c in conversations)
    total = min(total, limit) if limit is not None else total
    cl100k = get_counter("cl100k_base")
    per_q: list[dict[str, Any]] = []
    index_seconds = 0.0
    latencies: list[float] = []
    asked = 0
    with tempfile.TemporaryDirectory(prefix="memstack-bench-") as tmp:
        options = {"embedder": embedder, **_layer_options(method)}
        with Memory(
            Path(db) if db else Path(tmp) / "bench.db", layers=["retrieval"], options={k: v for k, v in options.items() if v is not None}
        ) as memory:
            for conv in conversations:
                if limit is not None and asked >= limit:
                    break
                keys = stored_keys(memory, conv) if db else None
                if keys is None:
                    t0 = time.perf_counter()
                    keys = ingest(memory, conv)
                    memory.flush()
                    index_seconds += time.perf_counter() - t0
                for q in conv.questions:
                    if limit is not None and asked >= limit:
                        break
                    asked += 1
                    t1 = time.perf_counter()
                    hits = memory.search(q.text, user_id=conv.id, at=q.at, k=max(ks))
                    latencies.append(time.perf_counter() - t1)
                    per_q.append(_score(q, hits, keys, ks, cl100k))
                    if progress:
                        progress(asked, total, f"{dataset} {method}: {statistics.median(latencies) * 1000:.0f} ms/query")
    return {**_report(dataset, method, per_q, ks, index_seconds, latencies), "translated": translated}


def _score(q, hits, keys: dict[str, str], ks: Sequence[int], counter) -> dict[str, Any]:
    out: dict[str, Any] = {"category": q.category, "recall": {}, "all": {}, "tokens": {}, "answer": {}}
    for k in ks:
        top = hits[:k]
        covered = {keys[i] for h in top for i in h.unit.source_ids if i in keys}
        found = len(q.evidence & covered)
        text = render_hits(top)
        out["recall"][k] = found / len(q.evidence)
        out["all"][k] = float(found == len(q.evidence))
        out["tokens"][k] = counter.count(text) if text else 0
        out["answer"][k] = float(bool(q.answer) and q.answer.strip().lower() in text.lower())
    return out


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _report(
    dataset: str, method: str, per_q: list[dict[str, Any]], ks: Sequence[int], index_seconds: float, latencies: list[float]
) -> dict[str, Any]:
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in per_q:
        by_cat[r["category"]].append(r)
    ordered = sorted(latencies)
    report = {
        "dataset": dataset,
        "method": method,
        "questions": len(per_q),
        "recall": {str(k): _mean([r["recall"][k] for r in per_q]) for k in ks},
        "all_evidence": {str(k): _mean([r["all"][k] for r in per_q]) for k in ks},
        "by_category": {c: {str(k): _mean([r["recall"][k] for r in rs]) for k in ks} for c, rs in sorted(by_cat.items())},
        "context_tokens": {str(k): round(_mean([r["tokens"][k] for r in per_q]), 1) for k in ks},
        "index_seconds": round(index_seconds, 2),
        "query_ms": {
            "p50": round(statistics.median(ordered) * 1000, 2) if ordered else None,
            "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 2) if ordered else None,
        },
    }
    if dataset in ("longmemeval", "memorybank-cn"):
        report["answer_in_context"] = {str(k): _mean([r["answer"][k] for r in per_q]) for k in ks}
    return report


def format_report(report: dict[str, Any]) -> str:
    ks = list(report["recall"])
    lines = [
        f"{report['dataset']} ({report['method']}{', translated' if report.get('translated') else ''}), {report['questions']} questions; index {report['index_seconds']} s; query p50 {report['query_ms']['p50']} ms, p95 {report['query_ms']['p95']} ms"
    ]
    lines.append("| | " + " | ".join(f"@{k}" for k in ks) + " |")
    lines.append("|---|" + "---|" * len(ks))
    rows = [("recall", report["recall"]), ("all evidence", report["all_evidence"]), ("context tokens", report["context_tokens"])]
    if "answer_in_context" in report:
        rows.append(("answer in context", report["answer_in_context"]))
    rows += [(f"recall: {c}", v) for c, v in report["by_category"].items()]
    for label, values in rows:
        lines.append(f"| {label} | " + " | ".join(str(values[k]) for k in ks) + " |")
    return "\n".join(lines)
