"""Benchmark: how far a model judge agrees with the keyword verdicts of `memstack bench qa`.

`bench qa --answers FILE` writes every answer with its verdict. On questions with
``answer_keywords`` (LifeAssist-CN) that verdict is reliable, so it measures a judge: this script
asks ``--judge`` (the strict ``JUDGE_PROMPT`` of ``bench qa --judge``) about each such answer and
counts where the two agree, and which way they differ. A judge that never calls a wrong answer
right gives lower bounds where only it can judge (LongMemEval's sentence answers).

    python bench/judge_agreement.py --data ../shared/data/lifeassist_cn/lifeassist_cn_dev.json \\
        --judge local answers.jsonl [more.jsonl ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from memstack.evaluation.datasets import load
from memstack.evaluation.qa import judge_answer, llm_verdict
from memstack.llm import get_chat_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", nargs="+", help="JSON lines written by bench qa --answers")
    parser.add_argument("--data", required=True, help="the benchmark file the answers are for (MemoryBank-CN format, with answer_keywords)")
    parser.add_argument("--judge", default="local", help="the judge's provider (default: local)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    questions = {q.id: q for c in load("memorybank-cn", args.data) for q in c.questions}
    rows = []
    for path in args.answers:
        with open(path, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r["id"] in questions and questions[r["id"]].keywords and r.get("by") != "error"]
    judge = get_chat_model(args.judge)
    started = time.perf_counter()
    pairs = []
    for n, r in enumerate(rows, 1):
        q = questions[r["id"]]
        pairs.append((judge_answer(q, r["answer"])["correct"], llm_verdict(judge, q, r["answer"]), r))
        if sys.stderr.isatty():
            print(f"\r{n}/{len(rows)}", end="", file=sys.stderr)
    report = {
        "judge": judge.name,
        "answers": len(pairs),
        "agree": sum(k == j for k, j, _ in pairs),
        "judge_right_keywords_wrong": sum(j and not k for k, j, _ in pairs),
        "judge_wrong_keywords_right": sum(k and not j for k, j, _ in pairs),
        "keywords_right": sum(k for k, _, _ in pairs),
        "seconds": round(time.perf_counter() - started, 1),
        "disagreements": [
            {"system": r["system"], "id": r["id"], "gold": r["gold"], "answer": r["answer"], "keywords": k, "judge": j}
            for k, j, r in pairs
            if k != j
        ],
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        n = report["answers"] or 1
        print(
            f"{report['judge']}: {report['agree']}/{report['answers']} agree ({report['agree'] / n:.1%}); "
            f"right where the keywords say wrong: {report['judge_right_keywords_wrong']}; "
            f"wrong where the keywords say right: {report['judge_wrong_keywords_right']} of {report['keywords_right']}; {report['seconds']} s"
        )
        for d in report["disagreements"]:
            print(f"  {d['system']} {d['id']}: keywords {d['keywords']}, judge {d['judge']} | {d['answer'][:80]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
