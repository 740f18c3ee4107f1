"""Benchmark: one question type of a MemoryBank-CN-format file asked again on kept stores.

``memstack bench qa --reuse DIR`` keeps each system's store in DIR; this asks only the questions
of one type (e.g. assistant) on those stores, each system in turn, with ``bench qa``'s own step
(the same instruction, model, budget and judge), and prints each answer and the count right.
For checking a read-side change on one type without asking the whole file again.

    python bench/qa_type.py --reuse DIR --data ../shared/data/lifeassist_cn/lifeassist_cn_dev.json \
        --type assistant --system personal-assistant --system window,retrieval
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from memstack.evaluation import qa
from memstack.evaluation.datasets import load
from memstack.llm import get_chat_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reuse", required=True, help="the folder of stores bench qa --reuse made")
    ap.add_argument("--data", required=True)
    ap.add_argument("--type", required=True, help="the question type to ask")
    ap.add_argument("--system", action="append", required=True, help="a preset or a stack (a comma-separated list of layers)")
    ap.add_argument("--model", default="local")
    ap.add_argument("--max-tokens", type=int, default=1200)
    args = ap.parse_args()
    conversations = load("memorybank-cn", args.data)
    chat = get_chat_model(args.model)
    count = functools.lru_cache(maxsize=65536)(chat.count_tokens)
    for name in args.system:
        system = qa.systems_for(strategies=[name])[0] if "," in name else qa.systems_for(presets=[name])[0]
        db = Path(args.reuse) / f"memorybank-cn-{qa._slug(system.name)}.db"
        if not db.exists():
            raise SystemExit(f"no store for {name} in {args.reuse}: run memstack bench qa --reuse {args.reuse} first")
        memory = qa._memory(system, db, chat, None)
        right = asked = 0
        try:
            for conv in conversations:
                for q in conv.questions:
                    if q.category != args.type:
                        continue
                    row = qa._ask(system, memory, conv, q, chat, count, None, args.max_tokens, "new")
                    right, asked = right + bool(row["correct"]), asked + 1
                    print(f"{name}\t{q.id}\t{row['correct']}\t{row['answer'][:80]!r}", flush=True)
        finally:
            memory.close()
        print(f"{name}: {right}/{asked} right ({args.type})")


if __name__ == "__main__":
    main()
