"""Benchmark: does showing a short retrieved turn with its neighbours raise recall per token?

For every question of a recall benchmark file, on a store already indexed by
``memstack bench recall ... --reuse FILE``: the top k hits of the default search, plain and as the
retrieval layer expands them (``Retrieval.with_neighbours``: units shorter than
``neighbour_below`` tokens with the unit before and after them in their thread). Reports
Recall@k (evidence turns covered, as in ``memstack bench recall``) and the mean cl100k tokens of
the rendered hits, so the two can be compared at equal tokens.

    python bench/neighbours.py --dataset locomo --data ../shared/data/locomo/locomo_dev.json --reuse /tmp/locomo.db
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from memstack import Memory
from memstack.evaluation.datasets import load
from memstack.evaluation.recall import stored_keys
from memstack.retrieval.render import render_hits
from memstack.tokens import get_counter


def score(shown, evidence, keys, counter) -> tuple[float, int]:
    """(share of the evidence turns the shown units cover, tokens of their rendering)."""
    covered = {keys[i] for h in shown for i in h.unit.source_ids if i in keys}
    return len(evidence & covered) / len(evidence), counter.count(render_hits(shown)) if shown else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--reuse", required=True, help="a store indexed by memstack bench recall --reuse")
    ap.add_argument("--below", type=int, default=None, help="neighbour_below (default: the layer's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cl100k = get_counter("cl100k_base")
    rows: dict[str, list[tuple[float, int]]] = {}
    with Memory(Path(args.reuse), layers=["retrieval"]) as mem:
        layer = mem._layer("retrieval", {} if args.below is None else {"neighbour_below": args.below})
        for conv in load(args.dataset, args.data):
            keys = stored_keys(mem, conv)
            if keys is None:
                raise SystemExit(f"{conv.id} is not in {args.reuse}: index it with memstack bench recall --reuse first")
            for q in conv.questions:
                hits = mem.search(q.text, user_id=conv.id, at=q.at, k=20)

                for k in (3, 5, 7, 10, 15, 20):
                    rows.setdefault(f"plain@{k}", []).append(score(hits[:k], q.evidence, keys, cl100k))
                for k in (3, 5, 7, 10):
                    rows.setdefault(f"neighbours@{k}", []).append(score(layer.with_neighbours(hits[:k]), q.evidence, keys, cl100k))
    report = {
        name: {"recall": round(statistics.mean(r for r, _ in v), 4), "tokens": round(statistics.mean(t for _, t in v), 1)}
        for name, v in rows.items()
    }
    if args.json:
        print(json.dumps(report))
    else:
        print("| | recall | tokens |\n|---|---|---|")
        for name, v in report.items():
            print(f"| {name} | {v['recall']} | {v['tokens']} |")


if __name__ == "__main__":
    main()
