"""Benchmark: what each scenario preset's context costs on a LoCoMo conversation.

Reads a store in which the conversation was ingested with all model-backed layers (made by
``bench/write_path.py --keep FILE``), then builds, for every question of that conversation, the
context each preset gives in the conversation's last session, and reports the mean tokens of the
whole context and of its memory sections (cl100k_base), within a budget.

    python bench/presets_cost.py --store /tmp/wp/conv26b.db --data ../shared/data/locomo/locomo_dev.json --conv conv-26 [--budget 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from memstack import Memory
from memstack.evaluation.datasets import load
from memstack.presets import PRESETS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--conv", default="conv-26")
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    conv = next(c for c in load("locomo", args.data) if c.id == args.conv)
    last = conv.sessions[-1]
    rows = {}
    for name in PRESETS:
        with Memory(Path(args.store), preset=name, counter="cl100k_base") as mem:
            total, memory = [], []
            for q in conv.questions:
                ctx = mem.context(user_id=conv.id, thread_id=last.id, query=q.text, at=q.at, max_tokens=args.budget)
                total.append(ctx.tokens)
                memory.append(sum(v for k, v in ctx.sections.items() if k.startswith("memory:")))
            rows[name] = {
                "questions": len(total),
                "context_tokens": round(statistics.mean(total), 1),
                "memory_tokens": round(statistics.mean(memory), 1),
                "layers": ",".join(PRESETS[name].layers),
            }
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"| preset | layers | context tokens (mean, budget {args.budget}) | of which memory sections |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['layers']} | {r['context_tokens']} | {r['memory_tokens']} |")


if __name__ == "__main__":
    main()
