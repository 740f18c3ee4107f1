"""The ``memstack`` command: a thin shell over Memory. Usage errors exit 2 with one line.

The store comes from ``--db URL``, else ``--home DIR`` (SQLite file inside), else MEMSTACK_HOME,
else the user's data directory. Every command takes ``--json`` and ``--tenant``; ``--vectors URL``
(else MEMSTACK_VECTORS) keeps the vectors outside the store, in Milvus (``milvus://host:19530``) or Chroma (``chroma://host:8000``).

Each command's help says in its first line what it does and ends naming the docs page that tells
the rest; docs/cli.md is generated from this parser (docs/gen_cli.py), so it cannot drift.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .backends import open_store
from .errors import InvalidInput, MemstackError, NotFound, UsageError
from .memory import Memory
from .presets import PRESETS
from .saved import is_record as is_saved_record
from .types import RECORD_KINDS, in_range, parse_time
from .views import plural

#: the scenario presets, named in --help (memstack.presets is data: importing it loads no layer)
PRESET_NAMES = tuple(PRESETS)
EXIT_USAGE = 2
EXIT_FAILURE = 1


class _DefaultTenant(str):
    """The --tenant no one gave ("default"): ``copy`` and ``verify`` then take every tenant."""


def _tenant_given(args: argparse.Namespace) -> bool:
    return not isinstance(args.tenant, _DefaultTenant)


def _common(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """The options every command takes, before the command (``memstack --home X import f``) or
    after it. Only the top parser holds their defaults: a subcommand's own default would overwrite
    a value given before the command, so there they default to SUPPRESS (set only when given)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    p.add_argument("--home", default=default(None), help="directory of the SQLite store (default: $MEMSTACK_HOME or the user data dir)")
    p.add_argument("--db", default=default(None), help="store URL: sqlite:///FILE, jsonl:///DIR, postgresql://..., memory://")
    p.add_argument("--tenant", default=default(_DefaultTenant("default")), help="tenant (default: default)")
    p.add_argument(
        "--vectors",
        default=default(os.environ.get("MEMSTACK_VECTORS") or None),
        metavar="URL",
        help="vector index outside the store: milvus://HOST:PORT[?collection=NAME], milvus:///ABS/FILE.db, chroma://HOST:PORT, chroma:///ABS/DIR (default: $MEMSTACK_VECTORS, else the store's own)",
    )
    p.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")


def _version() -> str:
    """The installed distribution's version (what pip shows), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memstack")
    except PackageNotFoundError:
        from . import __version__

        return __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the whole usage)
        self.exit(EXIT_USAGE, f"memstack: error: {message}\n")


class _Formatter(argparse.HelpFormatter):
    """Descriptions and epilogs keep their paragraphs (each one refilled to the terminal's width)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(super(_Formatter, self)._fill_text(part, width, indent) for part in text.strip().split("\n\n"))


def _command(sub: Any, name: str, summary: str, docs: str, details: str = "") -> argparse.ArgumentParser:
    """A subcommand: ``summary`` is its line in the command list and the first of its help, in
    ``details`` what more it needs said, and ``docs`` the page that tells the rest."""
    description = "\n\n".join(part for part in (summary[0].upper() + summary[1:] + ".", " ".join(details.split()), f"Docs: {docs}") if part)
    return sub.add_parser(name, help=summary, description=description, formatter_class=_Formatter)


DESCRIPTION = (
    "Memory for LLM chat apps and agents: every user's conversations kept, and a context for the next model call under a token budget."
)

EPILOG = """The store comes from --db URL, else --home DIR (a SQLite file inside), else $MEMSTACK_HOME, else the user
data directory. Every command takes --home, --db, --tenant, --vectors (else $MEMSTACK_VECTORS) and --json,
before or after the command (memstack --home ./h import f.jsonl). Usage errors exit 2 with one line;
memstack alone lists the commands (exit 2).

Times (--at, the timestamp of imported records) carry a UTC offset: 2026-11-02T20:05:00+08:00, or
2026-11-02T12:05:00Z for UTC. One without (2026-11-02T20:05:00, a bare date) is refused, exit 2, naming
the form with an offset (an import names its line), never taken as UTC: a clock time without a zone
is a different instant in every zone (the library raises InvalidInput, the REST API answers 422). One
outside the years 1900 to 9000 in UTC is refused the same way.

Docs: docs/cli.md (every command and option), docs/index.md (where to start)."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memstack", description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # none: main prints the commands

    p = _command(
        sub,
        "add",
        "store a message in a thread and queue the layers' work on it",
        "docs/library.md",
        "The message and the layers' jobs (indexing, extraction) are stored in one transaction; `memstack worker` runs the jobs, or --wait before returning. `-` reads the text from stdin, less the one newline that ends it (`echo` adds it); the rest is kept.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--role", required=True, choices=["user", "assistant", "system"])
    p.add_argument("--at", help="ISO 8601 timestamp of the message (default: now)")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("text", help="the message text, or - to read it from stdin")
    p.add_argument(
        "--strategy", help="check that the store's profile writes with these layers (default: the store's profile; see `memstack init`)"
    )
    p.add_argument("--preset", help="check that the store's profile is this preset: " + ", ".join(PRESET_NAMES))
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) before returning")
    p.set_defaults(run=cmd_add)

    p = _command(
        sub,
        "init",
        "configure the store's memory: the layers every process writes with, the chat model, the embedder",
        "docs/library.md",
        "The profile (the layers or the preset, their options, the chat model, the embedder, the token counter) is kept in the store, one per tenant, and every process that opens the store writes with it. A new store's default is window,retrieval (no model calls). A store already configured otherwise is refused: --reconfigure replaces the profile, queues every thread for the new layers (they read each thread from its start; run `memstack worker`) and, for a new embedder, re-embeds every unit.",
    )
    stack = p.add_mutually_exclusive_group()
    stack.add_argument("--preset", help="a scenario stack: " + ", ".join(PRESET_NAMES))
    stack.add_argument("--strategy", help="a stack of layers (default: window,retrieval: no model calls)")
    p.add_argument("--model", help="chat model of the model-backed layers: local (default) or a provider string, e.g. ollama:qwen3:8b")
    p.add_argument("--embedder", help="embedding provider of the retrieval layer (default: local)")
    p.add_argument("--tokenizer", help="token counter: estimate (default), cl100k_base, o200k_base or a model name")
    p.add_argument("--reconfigure", action="store_true", help="replace an existing configuration and queue every thread for the new layers")
    p.add_argument(
        "--retain",
        help="how long memory is kept, e.g. messages=180d,audit=365d,usage=90d[,derived=keep] (h, d, w; default: everything for ever; docs/retention.md)",
    )
    _budget_flags(p)
    p.set_defaults(run=cmd_init)

    p = _command(
        sub, "config", "show the store's memory configuration: the store, the tenant, the layers and the jobs waiting", "docs/library.md"
    )
    p.set_defaults(run=cmd_config)

    p = _command(
        sub,
        "context",
        "print the context for the next model call",
        "docs/layers.md",
        "Built with the store's profile, or read with another stack (--strategy) or preset; the whole context never exceeds --max-tokens under the token counter, and the report says what each part cost and what was dropped. It says on stderr how many of the user's jobs have not run yet (--wait runs them first).",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--query", help="the user's next message (not stored)")
    p.add_argument("--at", help="reference time, ISO 8601 (default: now)")
    p.add_argument("--strategy", help="read with this layer or comma-separated stack (default: the store's profile)")
    p.add_argument("--preset", help="read with a scenario stack instead: " + ", ".join(PRESET_NAMES))
    p.add_argument("--k", type=int, help="turns kept by the window layer")
    p.add_argument("--max-tokens", type=int, default=4000, help="token budget of the whole context (default: %(default)s)")
    p.add_argument("--tokenizer", default="estimate", help="token counter: estimate, cl100k_base, o200k_base or a model name")
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) first")
    p.set_defaults(run=cmd_context)

    p = _command(
        sub,
        "threads",
        "list a user's threads",
        "docs/library.md",
        "A user the tenant does not have: `no such user 'x'`, exit 1 (the REST API's 404 user_not_found); a known user with nothing to show: an empty list, exit 0.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.set_defaults(run=cmd_threads)

    p = _command(
        sub,
        "history",
        "print a thread's messages, in time order",
        "docs/library.md",
        "Ties as stored: a message added later with an earlier --at goes in its place (as GET .../messages and Memory.history()). A user the tenant does not have: `no such user 'x'`; a thread the user lacks: `user 'x' has no thread 'y'`; both exit 1.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", required=True, help="the thread's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--last", type=int, help="only the last N messages")
    p.set_defaults(run=cmd_history)

    p = _command(
        sub,
        "forget",
        "delete a thread, or a user with everything they own",
        "docs/privacy.md",
        "A user's messages, memories, saved memories and LangGraph checkpoints go, with a deletion note left in the same transaction (what, when, by whom, how many rows of what; no content). On a terminal it asks first; elsewhere it needs --yes.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", help="only this thread (default: the user with everything they own)")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=cmd_forget)

    p = _command(
        sub,
        "retention",
        "show the tenant's retention policy and its last pass, or run a pass now",
        "docs/retention.md",
        "`memstack retention` shows how long the tenant's memory is kept (`memstack init --retain`) and what the last pass deleted; `memstack retention run` deletes now what is older than the policy (for cron; `memstack worker` also does it, at most once an hour per tenant): messages, audit events and model calls past their kind's duration, and the memories made from expired messages only, each user's with a deletion note by `retention`.",
    )
    p.add_argument("action", nargs="?", choices=["show", "run"], default="show", help="show (default) or run a pass now")
    p.set_defaults(run=cmd_retention)

    p = _command(
        sub,
        "export",
        "write a user's messages and saved memories as JSON lines to stdout",
        "docs/library.md",
        'The messages, then the saved memories (records with "type": "note"); `memstack import` stores them again, in this store or another. A user the tenant does not have: `no such user \'x\'`, exit 1.',
    )
    p.add_argument("--user", help="the user's id (with --all: default every user of the tenant)")
    p.add_argument("--all", action="store_true", help="everything the store holds of the user, in the versioned format of docs/moving.md")
    p.set_defaults(run=cmd_export)

    p = _command(
        sub,
        "import",
        "store messages and saved memories from a JSON-lines export (- for stdin)",
        "docs/library.md",
        "Each message is stored once (by id), and the command says how many were already stored: `imported 0 of 6 messages (6 already stored)`; --json gives imported, records and already_stored. A timestamp without a UTC offset is refused, naming its line.",
    )
    p.add_argument("file", help="the export to read, or - for stdin")
    p.set_defaults(run=cmd_import)

    # ---- moving a whole store (memstack.transfer) ----
    p = _command(
        sub,
        "copy",
        "copy a whole store (every tenant, or one) to another store, then verify it",
        "docs/moving.md",
        "Every tenant of the source (or only --tenant's, or its --user ones), each user's messages with their ids and times, checkpoints, each layer's place in the write queue, every model-made record with its history, the audit trail, usage, retrieval units and saved memories, their vectors (--vectors: the source's index outside the store; --to-vectors: the destination's), LangGraph's own tables, each tenant's profile, and its deletion notes with the key their hashes were made under. Refuses a destination that holds users of a copied tenant (before copying anything) unless --into-existing (then no copied user may exist there), and one that holds deletion notes under a key of its own unless --no-deletions. Killed, it is finished by running it again. Ends with `memstack verify`: exit 1 naming each user and kind that differ.",
    )
    p.add_argument("source", metavar="SRC", help="the store to read: sqlite:///FILE, postgresql://..., jsonl:///DIR")
    p.add_argument("destination", metavar="DST", help="the store to write")
    p.add_argument("--user", action="append", help="only this user (repeat for more; default: every user of the tenant)")
    p.add_argument("--into-existing", action="store_true", help="add to a destination that holds other users of the tenant")
    p.add_argument(
        "--to-vectors",
        metavar="URL",
        help="the destination's vector index outside the store: milvus://HOST:PORT, milvus:///ABS/FILE.db, chroma://HOST:PORT, chroma:///ABS/DIR",
    )
    p.add_argument(
        "--reembed", action="store_true", help="copy no vectors (a new embedder): run `memstack reindex` on the destination afterwards"
    )
    p.add_argument("--batch", type=int, default=500, help="items per write (default: %(default)s)")
    p.add_argument(
        "--no-deletions", action="store_true", help="leave the deletion notes in the source (a destination with notes of its own)"
    )
    p.set_defaults(run=cmd_copy)

    p = _command(
        sub,
        "verify",
        "compare two stores: per user and kind, counts and a content digest",
        "docs/moving.md",
        "Exit 0 when every user of every tenant (or of --tenant) holds the same messages, checkpoints, job cursors, state documents, records, audit events, usage, units, vectors and LangGraph rows in both, and each tenant the same profile and deletion notes; else exit 1, one line per user and kind that differ.",
    )
    p.add_argument("source", metavar="SRC", help="one store")
    p.add_argument("destination", metavar="DST", help="the other")
    p.add_argument("--user", action="append", help="only this user (repeat for more)")
    p.add_argument("--to-vectors", metavar="URL", help="the destination's vector index outside the store")
    p.add_argument("--no-vectors", action="store_true", help="leave vectors out (after a copy with --reembed)")
    p.add_argument("--no-deletions", action="store_true", help="leave deletion notes out (after a copy with --no-deletions)")
    p.set_defaults(run=cmd_verify)

    p = _command(
        sub,
        "worker",
        "run the write queue: the layers' slow work (indexing, extraction)",
        "docs/scaling.md",
        "Any number of workers may share one store. Jobs are leased: no job runs in two workers at once (a running job renews its lease), and a killed worker's job reruns elsewhere after --lease seconds. Stops on SIGTERM after its current job.",
    )
    p.add_argument("--once", action="store_true", help="drain what is ready, including turns waiting for a fuller batch, and exit")
    p.add_argument("--model", help="chat model for the model-backed layers: local (default) or a provider string, e.g. ollama:qwen3:8b")
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument("--poll", type=float, default=1.0, help="seconds between polls (default: %(default)s)")
    p.add_argument(
        "--lease",
        type=float,
        default=300.0,
        help="seconds a claimed job stays this worker's, renewed while it runs; a worker that dies loses it after that (default: %(default)s)",
    )
    p.set_defaults(run=cmd_worker)

    for name, what in (
        ("entities", "a user's entities"),
        ("graph", "a user's relations"),
        ("state", "a user's JSON state"),
        ("audit", "the audit trail of a user's model-made memory"),
        ("usage", "the tenant's model calls and tokens per user, against its budget (--user: one user's calls)"),
    ):
        p = _command(sub, name, f"print {what}", "docs/costs.md" if name == "usage" else "docs/layers.md")
        p.add_argument("--user", required=name != "usage", help="the user's id")
        if name == "usage":
            p.add_argument("--since", help="only calls from then on: an ISO 8601 date or time (default: every call)")
        p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
        if name == "audit":
            p.add_argument("--kind", choices=RECORD_KINDS, help="only records of this kind")
            p.add_argument("--limit", type=int, default=100, help="records at most (default: %(default)s)")
        p.set_defaults(run=cmd_records, what=name)

    p = _command(
        sub,
        "search",
        "search a user's memories across threads",
        "docs/retrieval.md",
        "Hybrid search (BM25, dense vectors, sentence keys, feedback) over the units of every thread of the user, with the dates a question names read relative to --at. It says on stderr how many of the user's jobs have not run yet (--wait runs them first).",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument("--k", type=int, default=8, help="results at most (default: %(default)s)")
    p.add_argument("--at", help="reference time for dates in the query, ISO 8601 (default: now)")
    p.add_argument("--thread", action="append", help="only these threads (repeatable)")
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument("--wait", action="store_true", help="run the user's queued jobs (indexing, extraction) first")
    p.add_argument("query", help="what to look for, in the user's words")
    p.set_defaults(run=cmd_search)

    p = _command(
        sub,
        "reindex",
        "re-embed every memory (after changing the embedder), or cut the threads into units again",
        "docs/retrieval.md",
        "--rechunk cuts every thread into units again (stores indexed before 280-token chunks keep their older units until then); facts and other units stay, and the old units are replaced only once the new ones are stored. In Milvus the units go into a new generation that the collection's alias then moves to.",
    )
    p.add_argument("--embedder", help="embedding provider (default: local)")
    p.add_argument(
        "--rechunk",
        action="store_true",
        help="cut every thread into units again (after a change of chunk size; older stores used 200 tokens)",
    )
    p.add_argument("--chunk-tokens", type=int, help="with --rechunk: the largest unit in tokens (default: the layer's, 280)")
    p.set_defaults(run=cmd_reindex)

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

    p = _command(
        sub,
        "serve",
        "run the memory service: the REST API and the OpenAI-compatible proxy",
        "docs/service.md",
        "On the embedded defaults (the SQLite store, the local model) it needs no server and no key; an app gains memory by pointing its OpenAI base URL at http://HOST:PORT/v1. Without API keys it listens on loopback only. On SIGTERM it finishes the requests in flight, then drains the write queue for up to --graceful-timeout seconds.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s; any other needs API keys)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY:TENANT",
        help='an API key and the tenant it may touch (repeatable; also $MEMSTACK_API_KEYS="k1:t1,k2:t2")',
    )
    p.add_argument(
        "--model",
        help="the upstream chat model, also used by the model-backed layers: a provider string, e.g. vllm:MODEL@http://host:8000/v1 (default: the store's profile's model, else local)",
    )
    p.add_argument(
        "--strategy",
        help="check that the store's profile has these layers (default: the store's profile, written by `memstack init`; window,retrieval on a new store)",
    )
    p.add_argument("--preset", help="a scenario stack instead of --strategy: " + ", ".join(PRESET_NAMES))
    p.add_argument("--embedder", help="embedding provider of the retrieval layer (default: local)")
    p.add_argument("--max-tokens", type=int, default=4000, help="token budget of contexts and of proxied requests (default: %(default)s)")
    p.add_argument("--tokenizer", default="estimate", help="token counter: estimate, cl100k_base, o200k_base or a model name")
    p.add_argument(
        "--upstream-timeout",
        type=float,
        default=60.0,
        help="seconds the upstream model may go silent (before its first byte, between chunks, and for the in-process model between tokens of any answer) before a 504 (default: %(default)s)",
    )
    p.add_argument(
        "--double-submit-window",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="an identical request without an Idempotency-Key this soon after an answer (or while one is answered) is a double submit: it answers the same and stores nothing; later it is a regenerate; 0: only while answering (default: %(default)s)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a request's line and headers may take to arrive whole, from the connection's opening (or the request's first bytes); then the connection is closed; 0: no limit (default: %(default)s)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        help="seconds a request body may take to arrive whole; then 408 and the connection is closed (default: %(default)s)",
    )
    p.add_argument(
        "--upstream-total-timeout",
        type=float,
        default=600.0,
        help="seconds an answer may take in all (streamed, or the in-process model's); then a stream ends with a timeout error event, a plain answer with a 504 (default: %(default)s)",
    )
    p.add_argument(
        "--answer-max-tokens",
        type=int,
        default=512,
        metavar="N",
        help="an in-process model's answer bound when the client sets no max_tokens; 0: unbounded (default: %(default)s)",
    )
    p.add_argument("--max-body-bytes", type=int, default=1 << 20, help="largest request body; larger ones get 413 (default: %(default)s)")
    p.add_argument(
        "--graceful-timeout",
        type=float,
        default=30.0,
        help="seconds to let requests in flight finish, then to drain the write queue, on SIGTERM (default: %(default)s)",
    )
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument(
        "--public-metrics",
        action="store_true",
        help="with API keys, let /metrics answer without a key (for a scraper; default: a key is needed)",
    )
    p.add_argument(
        "--public-docs",
        action="store_true",
        help="with API keys, let /openapi.json, /docs and /redoc answer without a key (default: a key is needed)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the port, each with its own write-queue worker; needs a store that processes share (default: %(default)s)",
    )
    p.add_argument(
        "--no-worker",
        action="store_true",
        help="run no write-queue worker in the service: `memstack worker` processes run the layers' jobs",
    )
    p.add_argument(
        "--lease",
        type=float,
        default=300.0,
        help="seconds a job claimed by the service's write-queue worker stays its own, renewed while it runs; a killed process's job reruns elsewhere after that (default: %(default)s)",
    )
    p.set_defaults(run=cmd_serve)

    p = _command(
        sub,
        "ui",
        "open the memory dashboard in the browser (the service on 127.0.0.1, /ui)",
        "docs/dashboard.md",
        "On the embedded defaults, with no write-queue worker and no model loaded.",
    )
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--no-browser", action="store_true", help="only print the address")
    p.set_defaults(run=cmd_ui)

    p = _command(
        sub,
        "chat",
        "talk to a model with memory in the terminal: /context, /memories, /state, /forget",
        "docs/cli.md",
        "Needs pip install \"memstack[chat,local]\". Each line gets a context from the store's profile (or the --preset/--strategy it is checked against; `memstack init --preset personal-assistant` first for the model-backed memory), the answer is shown, and both are stored in the thread. One model answers and makes the memories, in a background worker; the first run assembles the local model under a progress bar. /context shows the last context as tables (each message's tokens, the cost of each memory section, what was dropped and why), /memories the entities, relations, this thread's summary notes and the retrieval hits for the last line, /state the user's JSON state, /flush makes memories of turns still waiting for a fuller batch, /import FILE stores an export as this user's messages, /forget deletes the thread (/forget all the user) after asking. /quit or Ctrl-D drains the write queue under a progress bar (Ctrl-C leaves the rest queued for `memstack worker`). Errors are one red line and the chat goes on.",
    )
    p.add_argument("--user", required=True, help="the user's id")
    p.add_argument("--thread", help="the conversation (default: today's UTC date, one thread per day)")
    stack = p.add_mutually_exclusive_group()
    stack.add_argument(
        "--preset",
        help="check that the store is configured with this scenario stack (default: the store's profile; see `memstack init`): "
        + ", ".join(PRESET_NAMES),
    )
    stack.add_argument("--strategy", help="a stack of layers instead of a preset, e.g. window,retrieval")
    p.add_argument(
        "--model",
        help="the chat model, also used by the model-backed layers: a provider string, e.g. ollama:qwen3:8b (default: the store's profile's model, else local)",
    )
    p.add_argument(
        "--max-tokens", type=int, default=4000, help="token budget of each context, capped by the model's window (default: %(default)s)"
    )
    p.set_defaults(run=cmd_chat)

    p = _command(
        sub,
        "mcp",
        "run an MCP server exposing one user's memory tools (save, recall, forget, state)",
        "docs/tools.md",
        "Needs pip install \"memstack[mcp]\". An MCP client starts `memstack mcp` itself, without your shell's environment (no MEMSTACK_HOME), so name the store in the client's command line (--home or --db). Over HTTP it says on stderr where it listens.",
    )
    p.add_argument("--user", required=True, help="whose memory the server's tools read and write")
    p.add_argument("--thread", help="the conversation to record with saved memories (default: none)")
    p.add_argument("--agent", help="the agent's id, when memory is kept per agent too")
    p.add_argument(
        "--tools",
        default="notes",
        choices=["notes", "key-value"],
        help="the tools' form: notes (save_memory(content), recall_memory(query)) or the articles' key-value (save_memory(key, value), recall_memory(key)) (default: %(default)s)",
    )
    p.add_argument(
        "--transport",
        default="stdio",
        choices=["stdio", "http"],
        help="stdio (spawned by the client) or streamable HTTP (default: %(default)s)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP address (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default: %(default)s); the endpoint is /mcp")
    p.add_argument("--allow-remote", action="store_true", help="listen on a non-loopback address although the server has no authentication")
    p.add_argument("--embedder", help="embedding provider of the recall search (default: local)")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(run=cmd_mcp)

    p = _command(
        sub,
        "backup",
        "copy the store to FILE as it is at one instant, while servers and workers keep writing",
        "docs/backups.md",
        "SQLite: SQLite's online backup API, the copy checked (integrity_check) and renamed into place; the store is not migrated. JSON lines: the directory copied under the store's lock. PostgreSQL is refused, naming the pg_dump line to run instead.",
    )
    p.add_argument("file", help="the backup: a new SQLite file (or directory, for a JSON lines store)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.set_defaults(run=cmd_backup)

    p = _command(
        sub,
        "demo",
        "replay a bundled Chinese conversation and show each strategy's context",
        "docs/cli.md",
        "Two sessions a week apart go into a fresh SQLite file on the embedded defaults (no server, no key, no network); the demo prints the context each strategy builds for the next question, then reopens the file as a restarted process would and continues the conversation. The file is in a temporary directory that the demo removes when it ends (--keep: in the store's home instead).",
    )
    p.add_argument("--keep", action="store_true", help="store the demo under --home/MEMSTACK_HOME instead of a temporary directory")
    p.set_defaults(run=cmd_demo)

    for name, p in sub.choices.items():
        if name != "bench":
            _common(p)
    return parser


def _memory(args: argparse.Namespace, **kwargs: Any) -> Memory:
    return Memory(
        open_store(args.db, home=args.home) if (args.db or args.home) else None, tenant=args.tenant, vectors=args.vectors, **kwargs
    )


def _read_text(value: str) -> str:
    """The message text, or stdin's for ``-``, less the one newline that ends what ``echo`` or a
    file gives (the shell's $(...) strips it too); any other whitespace is the user's and kept."""
    if value != "-":
        return value
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"stdin is not valid UTF-8 (byte {exc.start})", field="text") from exc
    return text.removesuffix("\r\n") if text.endswith("\r\n") else text.removesuffix("\n")


def _at(args: argparse.Namespace) -> datetime | None:
    """``--at`` as an aware datetime: one without a UTC offset is refused (exit 2), never taken as
    UTC, so the command line, the library and the REST API (422) agree."""
    return in_range(parse_time(args.at, field_name="--at"), field_name="--at") if args.at else None


def _emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, ensure_ascii=False, default=str))
    else:
        out = text()
        if out:
            print(out)


def cmd_add(args: argparse.Namespace) -> None:
    text = _read_text(args.text)
    at = _at(args)
    _one_stack(args)
    with _memory(args, layers=args.strategy, preset=args.preset) as mem:
        stored = mem.add({"role": args.role, "content": text}, user_id=args.user, thread_id=args.thread, agent_id=args.agent, at=at)
        if args.wait:
            mem.flush(user_id=args.user)
    data = [m.to_dict() | {"seq": m.seq} for m in stored]
    _emit(args, {"stored": data}, lambda: "\n".join(f"stored {m.id} ({m.role}, {m.timestamp.isoformat()})" for m in stored))


def _one_stack(args: argparse.Namespace) -> None:
    if getattr(args, "preset", None) and getattr(args, "strategy", None):
        raise UsageError("give --preset or --strategy, not both")


def cmd_init(args: argparse.Namespace) -> None:
    options = {k: v for k, v in (("model", args.model), ("embedder", args.embedder)) if v}
    store = open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    try:
        profile, queued = Memory.configure(
            store,
            layers=args.strategy,
            preset=args.preset,
            options=options,
            counter=args.tokenizer,
            tenant=args.tenant,
            reconfigure=args.reconfigure,
            vectors=args.vectors,
            retention=args.retain,
            budget=_budget_of(args, store),
        )
    finally:
        store.close()
    queued_line = f"\nqueued {plural(queued, 'thread')} for the new layers: run `memstack worker --once`" if queued else ""
    _emit(
        args,
        {"profile": profile.to_dict(), "store": store.url, "queued_threads": queued},
        lambda: f"{store.url} (tenant {args.tenant}): {profile.describe()}{_retain_line(profile)}{queued_line}",
    )


def cmd_config(args: argparse.Namespace) -> None:
    from . import expiry

    with _memory(args) as mem:
        profile, url, pending = mem.profile, mem.store.url, mem.pending()
        last = expiry.last_run(mem.store, args.tenant)
        waiting = mem.ceiling.waiting(args.tenant)
    data = {
        "store": url,
        "tenant": args.tenant,
        "profile": profile.to_dict(),
        "pending_jobs": pending,
        "budget": profile.budget.describe(),
        "waiting": waiting,
    }
    data["retention"] = {"policy": profile.retention.to_dict(), "last_run": last.to_dict() if last else None}
    budget = f"\nbudget  {profile.budget.describe()}" + "".join(f"\n        {w}" for w in waiting)
    _emit(
        args,
        data,
        lambda: (
            f"store   {url}\ntenant  {args.tenant}\nmemory  {profile.describe()}\npending {plural(pending, 'job')}{budget}\n"
            + _retention_lines(profile.retention, last)
        ),
    )


def _retain_line(profile: Any) -> str:
    """``memstack init``'s line of the retention policy, when the profile has one."""
    return "" if profile.retention.keeps_everything else f"\nretain {profile.retention.describe()}"


def _retention_lines(policy: Any, last: Any) -> str:
    """``memstack config``'s and ``memstack retention``'s lines: the policy and the last pass."""
    return f"retain  {policy.describe()}\nlast    {last.describe() if last else 'no retention pass yet'}"


def cmd_retention(args: argparse.Namespace) -> None:
    from . import expiry

    with _memory(args) as mem:
        done = expiry.run(mem.store, args.tenant, index=mem.vectors) if args.action == "run" else None
        policy, last = expiry.policy_of(mem.store, args.tenant), expiry.last_run(mem.store, args.tenant)
    if args.action == "run" and done is None:
        note = "the tenant keeps everything (no retention policy: `memstack init --reconfigure --retain ...`); nothing deleted"
        _emit(args, {"tenant": args.tenant, "policy": policy.to_dict(), "run": None}, lambda: note)
        return
    data = {"tenant": args.tenant, "policy": policy.to_dict(), "last_run": last.to_dict() if last else None}
    _emit(args, data, lambda: _retention_lines(policy, last))


def _budget_flags(p: argparse.ArgumentParser) -> None:
    """``init``'s cost ceilings (``memstack.costs``): kept in the profile, enforced by every worker and server."""
    p.add_argument(
        "--budget",
        action="append",
        help="the model-backed layers' ceiling: tokens=N/PERIOD for the tenant, tokens=N/PERIOD/user for each user (PERIOD: hour, day, month; UTC); repeatable or comma-separated. Jobs past it wait until the next period",
    )
    p.add_argument(
        "--answer-budget",
        help="what the proxy's answers may spend per user: tokens=N/PERIOD; past it the proxy answers 429 with Retry-After",
    )


def _budget_of(args: argparse.Namespace, store: Any) -> Any:
    """The budget ``init`` writes: the flags given over the stored one (None: no flag given)."""
    from .costs import Budget
    from .profile import Profile

    if not args.budget and not args.answer_budget:
        return None
    given = Budget.parse(args.budget or (), args.answer_budget)
    raw = store.profiles.get(args.tenant) if getattr(store, "profiles", None) is not None else None
    return given.over(Profile.from_dict(raw).budget if raw else Budget(), layers=bool(args.budget), answers=bool(args.answer_budget))


def cmd_usage(args: argparse.Namespace) -> None:
    from .ceiling import render, report

    since = None
    if args.since:
        text = args.since + ("T00:00:00Z" if len(args.since) == 10 else "")
        since = in_range(parse_time(text, field_name="--since"), field_name="--since")
    with _memory(args) as mem:
        data = report(mem.ceiling, args.tenant, user_id=args.user, since=since)
    _emit(args, data, lambda: render(data))


def _settle_jobs(args: argparse.Namespace, mem: Memory) -> None:
    """``--wait``: run the user's queued jobs first."""
    if getattr(args, "wait", False):
        mem.flush(user_id=args.user)


def _note_pending(args: argparse.Namespace, mem: Memory) -> None:
    """Say on stderr that some of the user's jobs wait: a search right after ``add`` would
    otherwise silently miss what is not indexed yet."""
    waiting = mem.pending(user_id=args.user)
    if waiting:
        print(
            f"memstack: note: {plural(waiting, 'job')} of user {args.user!r} not run yet (new messages not yet indexed or extracted); run `memstack worker --once` or pass --wait",
            file=sys.stderr,
        )
        for reason in mem.ceiling.waiting(args.tenant, args.user):
            print(f"memstack: note: {reason}", file=sys.stderr)


def cmd_context(args: argparse.Namespace) -> None:
    at = _at(args)
    _one_stack(args)
    with _memory(args, counter=args.tokenizer, max_tokens=args.max_tokens) as mem:
        _settle_jobs(args, mem)
        ctx = mem.context(
            user_id=args.user,
            thread_id=args.thread,
            agent_id=args.agent,
            query=args.query,
            at=at,
            k=args.k,
            strategy=args.strategy,
            preset=args.preset,
        )
        _note_pending(args, mem)
    _emit(args, ctx.to_dict(), lambda: _render_context(ctx))


def _render_context(ctx) -> str:
    lines = [f"[{m.role}] {m.text}" for m in ctx.messages]
    parts = ", ".join(f"{k} {v}" for k, v in ctx.sections.items() if v)
    lines.append(f"-- {plural(ctx.tokens, 'token')} ({ctx.counter}{'; ' + parts if parts else ''}), budget {ctx.max_tokens}")
    for d in ctx.dropped:
        lines.append(f"-- dropped {plural(len(d.message_ids), 'message')}, {d.tokens} tokens: {d.layer}: {d.reason}")
    return "\n".join(lines)


def _require_user(mem: Memory, args: argparse.Namespace) -> None:
    """An unknown user is "no such user" (exit 1), as REST's 404, not an empty answer."""
    from . import views

    if not views.known_user(mem.store, mem.scope(args.user)):
        raise NotFound(f"no such user {args.user!r} (tenant {args.tenant!r})", field="user_id")


def _require_thread(mem: Memory, args: argparse.Namespace) -> None:
    """An unknown thread (or user) is not found (exit 1), as REST's 404."""
    if not any(t.thread_id == args.thread for t in mem.threads(user_id=args.user, agent_id=args.agent)):
        _require_user(mem, args)
        raise NotFound(f"user {args.user!r} has no thread {args.thread!r}", field="thread_id")


def cmd_threads(args: argparse.Namespace) -> None:
    with _memory(args) as mem:
        infos = mem.threads(user_id=args.user, agent_id=args.agent)
        if not infos:
            _require_user(mem, args)
    data = [
        {
            "thread_id": t.thread_id,
            "agent_id": t.agent_id,
            "messages": t.messages,
            "first_at": t.first_at.isoformat(),
            "last_at": t.last_at.isoformat(),
        }
        for t in infos
    ]
    _emit(
        args,
        data,
        lambda: "\n".join(
            f"{t.thread_id}\t{plural(t.messages, 'message')}\t{t.first_at.isoformat()} .. {t.last_at.isoformat()}" for t in infos
        ),
    )


def cmd_history(args: argparse.Namespace) -> None:
    with _memory(args) as mem:
        msgs = mem.history(user_id=args.user, thread_id=args.thread, agent_id=args.agent, last=args.last)
        if not msgs:
            _require_thread(mem, args)
    _emit(args, [m.to_dict() for m in msgs], lambda: "\n".join(f"{m.timestamp.isoformat()} [{m.role}] {m.text}" for m in msgs))


def cmd_forget(args: argparse.Namespace) -> None:
    what = f"thread {args.thread!r} of user {args.user!r}" if args.thread else f"user {args.user!r} and everything they own"
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to delete {what} without confirmation: pass --yes")
        answer = input(f"Delete {what} (tenant {args.tenant!r})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            _emit(args, {"deleted": 0}, lambda: "nothing deleted")
            return
    with _memory(args) as mem:
        n = mem.forget(user_id=args.user, thread_id=args.thread, agent_id=args.agent, by="cli")
    _emit(args, {"deleted": n}, lambda: f"deleted {what}: {plural(n, 'record')}")


def cmd_export(args: argparse.Namespace) -> None:
    if args.all:
        return _export_all(args)
    if not args.user:
        raise UsageError("the following arguments are required: --user (or --all)")
    with _memory(args) as mem:
        _require_user(mem, args)
        for rec in mem.export(user_id=args.user):
            print(json.dumps(rec, ensure_ascii=False))


def cmd_import(args: argparse.Namespace) -> None:
    raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{args.file} is not valid UTF-8 (byte {exc.start})") from exc
    records, lines = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{args.file}:{i}: not JSON: {exc.msg}") from exc
            lines.append(i)
    from .transfer.portable import is_header

    if records and is_header(records[0]):
        return _import_all(args, records, lines)
    with _memory(args) as mem:
        n = _import_lines(mem, records, lines, args.file)
    stored = len(records) - n
    data = {"imported": n, "records": len(records), "already_stored": stored}
    noun = "record" if any(isinstance(r, dict) and is_saved_record(r) for r in records) else "message"  # saved memories too
    _emit(args, data, lambda: f"imported {n} of {plural(len(records), noun)}" + (f" ({stored} already stored)" if stored else ""))


def _import_lines(mem: Memory, records: list[Any], lines: list[int], file: str) -> int:
    """``Memory.import_``, with a bad record named by its line in the file (blank lines make the
    record's number and its line differ). Every record that is not stored was already stored:
    import_ skips a message whose id the thread holds and refuses anything else before writing."""
    seen, done = 0, False

    def counted() -> Iterator[Any]:
        nonlocal seen, done
        for rec in records:
            seen += 1
            yield rec
        done = True

    try:
        return mem.import_(counted())
    except InvalidInput as exc:
        if done or not seen:
            raise
        reason = str(exc).removeprefix(f"record {seen}: ")
        raise InvalidInput(f"{file}:{lines[seen - 1]}: {reason}", field=exc.field) from exc


# ---- moving a whole store (memstack.transfer) ----


def _two_stores(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """The source and destination stores and their vector indexes (None: without one)."""
    from .backends import open_vectors

    src, dst = open_store(args.source), open_store(args.destination)
    src_index = open_vectors(args.vectors) or getattr(src, "vectors", None)
    dst_index = open_vectors(args.to_vectors) or getattr(dst, "vectors", None)
    return src, dst, src_index, dst_index


def _differences(args: argparse.Namespace, differences: Sequence[Any], clean: str) -> None:
    if differences:
        raise MemstackError("the stores differ:\n" + "\n".join(f"  {d}" for d in differences))
    _emit(args, {"differences": []}, lambda: clean)


def cmd_copy(args: argparse.Namespace) -> None:
    """Every tenant of the source, unless --tenant or --user names where to look."""
    from collections import Counter

    from .transfer import copy_tenants
    from .transfer.progress import Progress

    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    src, dst, src_index, dst_index = _two_stores(args)
    try:
        progress = Progress(users=len(args.user) if args.user else 0)
        reports = copy_tenants(
            src,
            dst,
            tenants=[args.tenant] if _tenant_given(args) or args.user else None,
            users=args.user,
            src_index=None if args.reembed else src_index,
            dst_index=None if args.reembed else dst_index,
            into_existing=args.into_existing,
            batch=args.batch,
            progress=progress,
            deletions=not args.no_deletions,
        )
        progress.done()
    finally:
        src.close()
        dst.close()
    read: Counter[str] = Counter()
    for report in reports.values():
        read.update(report.read)
    said = ", ".join(f"{n} {kind}" for kind, n in read.items())
    users = sum(r.users for r in reports.values())
    where = f" of {plural(len(reports), 'tenant')}" if len(reports) != 1 else ""
    resumed = " (resumed)" if any(r.resumed for r in reports.values()) else ""
    _differences(
        args,
        [f"tenant {t!r}: {d}" if len(reports) > 1 else d for t, r in reports.items() for d in r.differences],
        f"copied {plural(users, 'user')}{where} ({said or 'nothing'}){resumed}; verify: clean",
    )


def cmd_verify(args: argparse.Namespace) -> None:
    """Every tenant of either store, unless --tenant or --user names where to look."""
    from .transfer.copying import verify, verify_tenants

    src, dst, src_index, dst_index = _two_stores(args)
    indexes: dict[str, Any] = {"src_index": None if args.no_vectors else src_index, "dst_index": None if args.no_vectors else dst_index}
    indexes["deletions"] = not args.no_deletions
    try:
        found: list[Any]
        if _tenant_given(args) or args.user:
            found = verify(src, dst, tenant=args.tenant, users=args.user, **indexes)
        else:
            found = [f"tenant {t!r}: {d}" for t, d in verify_tenants(src, dst, **indexes)]
    finally:
        src.close()
        dst.close()
    _differences(args, found, "verify: clean")


def _store_and_index(args: argparse.Namespace) -> tuple[Any, Any]:
    """The store itself (no Memory: opening one would write a default profile) and its vector index."""
    from .backends import open_vectors

    store = open_store(args.db, home=args.home)
    return store, open_vectors(args.vectors) or getattr(store, "vectors", None)


def _export_all(args: argparse.Namespace) -> None:
    from .transfer import write_export
    from .transfer.source import users

    store, index = _store_and_index(args)
    try:
        chosen = [args.user] if args.user else users(store, args.tenant)
        if args.user and args.user not in users(store, args.tenant):
            raise NotFound(f"no such user {args.user!r}")
        write_export(store, args.tenant, chosen, sys.stdout, index=index)
    finally:
        store.close()


def _import_all(args: argparse.Namespace, records: list[Any], lines: list[int]) -> None:
    from .transfer import read_export

    store, index = _store_and_index(args)
    try:
        stored = read_export(zip(lines, records, strict=True), store, index=index)
    finally:
        store.close()
    total = sum(stored.values())
    _emit(
        args,
        {"imported": stored},
        lambda: f"imported {plural(total, 'item')}" + (" (" + ", ".join(f"{n} {k}" for k, n in stored.items()) + ")" if stored else ""),
    )


def cmd_worker(args: argparse.Namespace) -> None:
    options = {k: v for k, v in (("model", args.model), ("embedder", args.embedder)) if v}
    with _memory(args, options=options, lease_seconds=args.lease) as mem:
        if args.once:
            # redrawn on a terminal; piped (a log, cron), only the summary below
            if sys.stderr.isatty() and not args.json:
                from .evaluation.progress import Progress

                with Progress() as progress:
                    report = mem.flush(progress=progress)
            else:
                report = mem.flush()
            mem.retention_pass()
            _emit(
                args,
                {"ran": report.ran, "failed": report.failed, "errors": list(report.errors)}
                | ({"waited": report.waited} if report.waited else {}),
                lambda: (
                    f"ran {plural(report.ran, 'job')}, {report.failed} failed"
                    + (f", put off {plural(report.waited, 'time')} by the budget (memstack usage)" if report.waited else "")
                ),
            )
            return
        _run_until_stopped(mem, args.poll)


def _run_until_stopped(mem: Memory, poll: float) -> None:
    """``memstack worker``: run jobs as they come until SIGTERM (the job running then finishes and
    is recorded first, so a stopped worker leaves no lease to run out) or Ctrl-C (at once)."""
    import signal
    import threading

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set():
            mem.retention_pass()
            report = mem.run_jobs(max_jobs=1)
            if not (report.ran or report.failed):
                stop.wait(poll)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_records(args: argparse.Namespace) -> None:
    from . import views

    if args.what == "usage" and (args.user is None or args.since):
        return cmd_usage(args)
    with _memory(args) as mem:
        scope = mem.scope(args.user, agent_id=args.agent)
        data = views.VIEWS[args.what](mem.store, scope, **({"kind": args.kind, "limit": args.limit} if args.what == "audit" else {}))
    _emit(args, data, lambda: views.render(args.what, data))


def cmd_search(args: argparse.Namespace) -> None:
    from .types import SearchFilter

    at = _at(args)
    where = SearchFilter(thread_ids=tuple(args.thread)) if args.thread else None
    options = {"embedder": args.embedder} if args.embedder else {}
    with _memory(args) as mem:
        _settle_jobs(args, mem)
        hits = mem.search(args.query, user_id=args.user, agent_id=args.agent, k=args.k, at=at, where=where, **options)
        _note_pending(args, mem)
    data = [
        {
            "id": h.unit.id,
            "score": round(h.score, 6),
            "text": h.unit.text,
            "thread_id": h.unit.scope.thread_id,
            "timestamp": h.unit.timestamp.isoformat(),
            "source_ids": list(h.unit.source_ids),
            "ranks": dict(h.ranks),
        }
        for h in hits
    ]
    _emit(
        args,
        data,
        lambda: (
            "\n".join(f"{h.score:.4f}  [{h.unit.timestamp.date()} {h.unit.scope.thread_id}] {h.unit.text}" for h in hits)
            or "no relevant memories"
        ),
    )


def cmd_reindex(args: argparse.Namespace) -> None:
    from .layers.retrieval import reindex

    if args.chunk_tokens is not None and (not args.rechunk or args.chunk_tokens < 20):
        raise UsageError("--chunk-tokens goes with --rechunk and is at least 20")
    switched: list[Any] = []
    with _memory(args) as mem:
        options = {"chunk_tokens": args.chunk_tokens} if args.chunk_tokens else {}
        progress = None if args.json else lambda done: print(f"\r{plural(done, 'unit')}", end="", file=sys.stderr)
        n = reindex(
            mem.store, args.embedder, rechunk=args.rechunk, progress=progress, vectors=mem.vectors, on_switch=switched.append, **options
        )
    data: dict[str, Any] = {"reindexed": n}
    if switched:
        data.update(serving=switched[0].serving, previous=switched[0].previous, dropped=list(switched[0].dropped))
    _emit(args, data, lambda: f"\nreindexed {plural(n, 'unit')}" + (_switch_line(switched[0]) if switched else ""))


def _switch_line(switch: Any) -> str:
    """What a reindex into a new collection did, for the reader who owns the server."""
    line = f" into collection {switch.serving}, now searched" if switch.serving else "; the index is empty"
    if switch.previous:
        line += f"; {switch.previous} is kept, no longer searched (a way back), until the next reindex drops it"
    if switch.dropped:
        line += f"; dropped older generations {', '.join(switch.dropped)}"
    return line


def cmd_bench_recall(args: argparse.Namespace) -> None:
    from .evaluation.progress import Progress
    from .evaluation.recall import format_report, run

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
    from .evaluation.progress import Progress
    from .evaluation.qa import format_report, run, systems_for

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
    from .evaluation.facts import format_report, run
    from .evaluation.progress import Progress
    from .evaluation.qa import systems_for

    split = lambda values: [x.strip() for v in values for x in v.split(",") if x.strip()]  # noqa: E731
    if not (args.preset or args.layers):
        raise UsageError("name what to test: --preset or --layers (e.g. --preset personal-assistant)")
    systems = systems_for(split(args.preset), args.layers)
    with Progress() as progress:
        report = run(args.data, systems, model=args.model, limit=args.limit, only=args.only, embedder=args.embedder, progress=progress)
    if isinstance(args.json, str):
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    _emit(argparse.Namespace(json=args.json is True), report, lambda: format_report(report))


def cmd_serve(args: argparse.Namespace) -> None:
    from .server.auth import ENV, check_exposure, parse_api_keys

    keys = {**parse_api_keys(os.environ.get(ENV, "")), **parse_api_keys(args.api_key)}
    check_exposure(args.host, keys)
    from .server import ServerConfig, create_app
    from .server.run import serve

    store = open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    model = args.model or _profile_model(args, store)
    config = ServerConfig(
        db=store,
        strategy=args.strategy,
        preset=args.preset,
        model=model,
        embedder=args.embedder,
        api_keys=keys,
        tenant=args.tenant,
        max_tokens=args.max_tokens,
        counter=args.tokenizer,
        upstream_timeout=args.upstream_timeout,
        double_submit_window=args.double_submit_window,
        upstream_total_timeout=args.upstream_total_timeout,
        body_timeout=args.body_timeout,
        warm_model=True,
        answer_max_tokens=args.answer_max_tokens or None,
        max_body_bytes=args.max_body_bytes,
        drain_seconds=args.graceful_timeout,
        public_metrics=args.public_metrics,
        public_docs=args.public_docs,
        vectors=args.vectors,
        worker=not args.no_worker,
        lease_seconds=args.lease,
    )
    if args.workers != 1:
        _serve_workers(args, config, store)
        return
    serve(
        create_app(config=config),
        host=args.host,
        port=args.port,
        graceful_seconds=args.graceful_timeout,
        log_level=args.log_level,
        header_seconds=args.header_timeout or None,
    )


def cmd_ui(args: argparse.Namespace) -> None:
    from .server.ui.launch import open_dashboard

    store = open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    open_dashboard(
        store, tenant=args.tenant, model=_profile_model(args, store), port=args.port, browser=not args.no_browser, vectors=args.vectors
    )


def _serve_workers(args: argparse.Namespace, config: Any, store: Any) -> None:
    """``serve --workers N``: each worker process opens the store from its URL (``server.workers``)."""
    from dataclasses import replace

    from .server.workers import serve_workers

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    store.close()
    serve_workers(
        replace(config, db=store.url),
        workers=args.workers,
        host=args.host,
        port=args.port,
        graceful_seconds=args.graceful_timeout,
        log_level=args.log_level,
        header_seconds=args.header_timeout or None,
    )


def _profile_model(args: argparse.Namespace, store: Any = None) -> str:
    """The chat model the store's profile names for the tenant, else "local"."""
    opened = store if store is not None else open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    try:
        profiles = getattr(opened, "profiles", None)
        stored = profiles.get(args.tenant) if profiles is not None else None
    finally:
        if store is None:
            opened.close()
    model = (stored or {}).get("options", {}).get("model")
    return model if isinstance(model, str) and model else "local"


def cmd_chat(args: argparse.Namespace) -> None:
    """Thin: the REPL is ``memstack.chat.run_chat``; rich is imported only here (the chat extra)."""
    from .errors import require

    require("rich", extra="chat")
    from .chat import run_chat
    from .llm import get_chat_model

    model = get_chat_model(args.model or _profile_model(args))
    stack = {"layers": args.strategy} if args.strategy else {"preset": args.preset} if args.preset else {}
    with _memory(args, **stack, options={"model": model}, max_tokens=args.max_tokens) as mem:
        status = run_chat(mem, model, user_id=args.user, thread_id=args.thread)
    if status:
        sys.exit(status)


def cmd_mcp(args: argparse.Namespace) -> None:
    from .mcp_server import serve
    from .tools import memory_tools

    with _memory(args, options={"embedder": args.embedder} if args.embedder else None) as mem:
        tools = memory_tools(mem, args.user, args.thread, form=args.tools, agent_id=args.agent)
        serve(tools, transport=args.transport, host=args.host, port=args.port, allow_remote=args.allow_remote, log_level=args.log_level)


def cmd_backup(args: argparse.Namespace) -> None:
    from .backup import backup

    done = backup(args.db, args.file, home=args.home, overwrite=args.overwrite)
    _emit(
        args,
        {"kind": done.kind, "source": done.source, "backup": done.target, "bytes": done.bytes},
        lambda: f"backed up {done.source} to {done.target} ({done.bytes} bytes)",
    )


def cmd_demo(args: argparse.Namespace) -> None:
    from .demo import run_demo

    run_demo(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `memstack`: what there is to run, not just an error
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        args.run(args)
    except NotFound as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except UsageError as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MemstackError as exc:
        print(f"memstack: failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, FileNotFoundError) else EXIT_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
