"""``memstack bench``: recall of evidence per token of context (``recall``), answer accuracy with a
chat model in the loop against the none, full and oracle baselines (``qa``), and the precision of
what the model-backed layers store (``facts``), each over ``memstack.evaluation``, imported only
when a benchmark runs. ``bench`` itself takes no common options; ``recall`` and ``qa`` take them
after their own, ``facts`` none (its --json names a file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, UsageError
from .common import PRESET_NAMES, _emit
from .options import _command, _common


def declare_bench(sub: Any) -> None:
    """``memstack bench recall|qa|facts``."""
    p = _command(
        sub,
        "bench",
        "measure recall, answer accuracy or what the layers store, on a benchmark file",
        "docs/benchmarks.md",
        "The public benchmark files are not shipped with memstack (their licences differ): LoCoMo (locomo10.json from github.com/snap-research/locomo), LongMemEval (longmemeval_s.json from huggingface.co/datasets/xiaowu0162/longmemeval) and MemoryBank (the Chinese conversations and probing questions of github.com/zhongwanjun/MemoryBank-SiliconFriend, in the format memstack.evaluation.datasets reads); --data takes the downloaded file (.json or .json.gz). The fact set (--dataset facts) is in the checkout's bench/data/facts.",
    )
    bench = p.add_subparsers(dest="bench", required=True)
    p = _command(bench, "recall", "measure recall of evidence per token of context on a benchmark file", "docs/benchmarks.md")
    p.add_argument("--dataset", required=True, choices=["locomo", "longmemeval", "memorybank-cn", "facts"])
    p.add_argument(
        "--data",
        help="the benchmark file (.json or .json.gz); for facts, a directory of *.jsonl (default: the checkout's bench/data/facts)",
    )
    p.add_argument(
        "--translated",
        action="store_true",
        help="ask each question in its other language (facts: English over Chinese memory and Chinese over English)",
    )
    p.add_argument("--method", default="default", choices=["default", "hybrid", "bm25", "dense"])
    p.add_argument("--k", default="1,5,10,20", help="cut-offs, comma-separated (default: %(default)s)")
    p.add_argument("--limit", type=int, help="questions at most")
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="only this conversation (repeatable), e.g. conv-26")
    p.add_argument("--reuse", metavar="FILE", help="keep the ingested conversations in this SQLite file and reuse them on the next run")
    p.set_defaults(run=cmd_bench_recall)
    _common(p)
    p = _command(
        bench,
        "qa",
        "measure answer accuracy with a chat model in the loop: presets and stacks against the none, full and oracle baselines",
        "docs/benchmarks.md",
        "What the product is for: does a chat model, given memstack's context, answer right? Each preset or stack ingests the file's conversations as an app would (Memory.add per dated session, its model-backed layers fed by the worker), then every question is asked at its reference time in a new thread (--thread last: in the last session's thread): Memory.context(query=..., max_tokens=...) goes to --model after one fixed answering instruction (Chinese for Chinese data). The baselines answer the same questions with the same model in the same run: none (the question alone), full (the newest turns of the whole history that fit the model's window) and oracle (only the evidence turns: the model's reading ceiling). An answer is right when it contains one alternative of every answer_keywords entry (case, spaces and full/half width ignored), else the short gold answer (remarks in parentheses aside), else when it holds 60% of a long gold answer's tokens (the question's own words left out; token F1 is reported beside); --judge adds a strict model grader whose verdict then counts. The report gives accuracy overall and per question type, the share of the oracle's accuracy, context tokens (mean, p95), the write side's model tokens per ingested turn, ingest time and answer latency; progress redraws on a terminal and prints a plain line every 5% when piped.",
    )
    p.add_argument("--dataset", required=True, choices=["locomo", "longmemeval", "memorybank-cn", "facts"])
    p.add_argument(
        "--data",
        help="the benchmark file (.json or .json.gz; MemoryBank-CN format files may carry answer_keywords); for facts, a directory of *.jsonl (default: the checkout's bench/data/facts)",
    )
    p.add_argument(
        "--translated",
        action="store_true",
        help="ask each question in its other language (facts: English over Chinese memory and Chinese over English)",
    )
    p.add_argument(
        "--preset",
        action="append",
        default=[],
        help="a scenario preset to test (repeatable or comma-separated): " + ", ".join(PRESET_NAMES),
    )
    p.add_argument("--strategy", action="append", default=[], help="a stack of layers to test, e.g. window,retrieval (repeatable)")
    p.add_argument(
        "--baselines", default="none,full,oracle", help="baselines in the same run, comma-separated, or '' for none (default: %(default)s)"
    )
    p.add_argument("--model", default="local", help="the chat model of the model-backed layers and of the answers (default: %(default)s)")
    p.add_argument("--judge", help="a chat model that also grades every answer with a strict correct/wrong prompt (default: rules only)")
    p.add_argument("--max-tokens", type=int, default=1200, help="token budget of each memory context (default: %(default)s)")
    p.add_argument("--thread", choices=["new", "last"], default="new", help="ask in a new thread (default) or in the last session's thread")
    p.add_argument("--limit", type=int, help="questions at most")
    p.add_argument("--per-type", type=int, help="questions at most per question type (a stratified sample)")
    p.add_argument(
        "--sessions",
        choices=["all", "evidence"],
        default="all",
        help="ingest every session (default) or only those that hold a question's evidence (LongMemEval's oracle setting)",
    )
    p.add_argument("--only", action="append", default=[], metavar="ID", help="only this conversation (repeatable)")
    p.add_argument("--embedder", help="embedding provider of the retrieval layer (default: local)")
    p.add_argument("--reuse", metavar="DIR", help="keep each system's ingested store in DIR and reuse it on the next run")
    p.add_argument("--answers", metavar="FILE", help="also write every question's context size, answer and verdict as JSON lines")
    p.set_defaults(run=cmd_bench_qa)
    _common(p)
    p = _command(
        bench,
        "facts",
        "measure the precision of what the model-backed layers store, against the gold statements of a development set",
        "docs/benchmarks.md",
    )
    p.add_argument(
        "--preset",
        action="append",
        default=[],
        help="a scenario preset to test (repeatable or comma-separated): " + ", ".join(PRESET_NAMES),
    )
    p.add_argument(
        "--layers", action="append", default=[], metavar="STACK", help="a stack of layers to test, e.g. entities,graph (repeatable)"
    )
    p.add_argument("--model", default="local", help="the chat model of the model-backed layers (default: %(default)s)")
    p.add_argument(
        "--data", help="a directory of *.jsonl conversations with gold statements, or one file (default: the checkout's bench/data/facts)"
    )
    p.add_argument("--limit", type=int, help="conversations at most")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="only this conversation (repeatable)")
    p.add_argument("--embedder", help="embedding provider of the retrieval layer (default: local)")
    p.add_argument(
        "--json",
        nargs="?",
        const=True,
        default=argparse.SUPPRESS,
        metavar="OUT",
        help="write the whole report as JSON to OUT (alone: print it instead of the table)",
    )
    p.set_defaults(run=cmd_bench_facts)


def cmd_bench_recall(args: argparse.Namespace) -> None:
    from ..evaluation.progress import Progress
    from ..evaluation.recall import format_report, run

    try:
        ks = [int(x) for x in args.k.split(",") if x.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--k: not a list of integers: {args.k!r}") from exc
    if not ks or min(ks) < 1:
        raise InvalidInput("--k: give positive cut-offs, e.g. 1,5,10")
    with Progress() as progress:
        report = run(
            args.dataset,
            args.data,
            method=args.method,
            ks=ks,
            limit=args.limit,
            embedder=args.embedder,
            progress=progress,
            db=args.reuse,
            only=args.only,
            translated=args.translated,
        )
    _emit(args, report, lambda: format_report(report))


def cmd_bench_qa(args: argparse.Namespace) -> None:
    from ..evaluation.progress import Progress
    from ..evaluation.qa import format_report, run, systems_for

    split = lambda values: [x.strip() for v in values for x in v.split(",") if x.strip()]  # noqa: E731
    systems = systems_for(split(args.preset), args.strategy, split([args.baselines]))
    if args.max_tokens < 1:
        raise InvalidInput("--max-tokens must be positive", field="max_tokens")
    with Progress() as progress:
        report = run(
            args.dataset,
            args.data,
            systems,
            model=args.model,
            judge=args.judge,
            max_tokens=args.max_tokens,
            limit=args.limit,
            per_type=args.per_type,
            only=args.only,
            reuse=args.reuse,
            embedder=args.embedder,
            thread=args.thread,
            translated=args.translated,
            sessions=args.sessions,
            progress=progress,
        )
    if args.answers:
        with open(args.answers, "w", encoding="utf-8") as f:
            for name, system in report["systems"].items():
                for row in system["answers"]:
                    f.write(json.dumps({"system": name, **row}, ensure_ascii=False) + "\n")
    if not args.json:
        for system in report["systems"].values():
            system.pop("answers")
    _emit(args, report, lambda: format_report(report))


def cmd_bench_facts(args: argparse.Namespace) -> None:
    from ..evaluation.facts import format_report, run
    from ..evaluation.progress import Progress
    from ..evaluation.qa import systems_for

    split = lambda values: [x.strip() for v in values for x in v.split(",") if x.strip()]  # noqa: E731
    if not (args.preset or args.layers):
        raise UsageError("name what to test: --preset or --layers (e.g. --preset personal-assistant)")
    systems = systems_for(split(args.preset), args.layers)
    with Progress() as progress:
        report = run(args.data, systems, model=args.model, limit=args.limit, only=args.only, embedder=args.embedder, progress=progress)
    if isinstance(args.json, str):
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    _emit(argparse.Namespace(json=args.json is True), report, lambda: format_report(report))
