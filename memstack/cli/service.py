"""The long-running commands: ``worker`` (the write queue, any number per store, leased jobs,
stops on SIGTERM after its job), ``serve`` (the REST API and the OpenAI-compatible proxy; loopback
only without API keys; ``--workers N`` processes), ``ui`` (the dashboard), ``chat`` (the terminal
chat) and ``mcp`` (an MCP server over one user's memory tools). The server, the chat, the MCP SDK
and the models are imported inside the commands, never at import: ``memstack --help`` loads none
of them, and only this command line imports the server (pyproject's import contracts)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..backends import open_store
from ..errors import UsageError
from ..jobs import IDLE_SECONDS
from ..memory import Memory
from ..views import plural
from .common import PRESET_NAMES, _emit, _memory
from .options import _command


def declare_worker(sub: Any) -> None:
    """``memstack worker``: ``--once``, or until stopped."""
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
    p.add_argument(
        "--idle",
        type=float,
        default=IDLE_SECONDS,
        help="seconds a thread stays quiet before the turns its model-backed layers hold back for a fuller batch are run as at a flush; 0 at once, -1 only by a flush (default: %(default)s)",
    )
    p.set_defaults(run=cmd_worker)


def _idle(seconds: float) -> float | None:
    return None if seconds < 0 else seconds


def cmd_worker(args: argparse.Namespace) -> None:
    options = {k: v for k, v in (("model", args.model), ("embedder", args.embedder)) if v}
    with _memory(args, options=options, lease_seconds=args.lease, idle_seconds=_idle(args.idle)) as mem:
        if args.once:
            # redrawn on a terminal; piped (a log, cron), only the summary below
            if sys.stderr.isatty() and not args.json:
                from ..evaluation.progress import Progress

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


def declare_serve(sub: Any) -> None:
    """``memstack serve``: the service's limits and timeouts, each an option."""
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
    p.add_argument(
        "--idle",
        type=float,
        default=IDLE_SECONDS,
        help="seconds a thread stays quiet before the turns its model-backed layers hold back for a fuller batch are run as at a flush; 0 at once, -1 only by a flush (default: %(default)s)",
    )
    p.set_defaults(run=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> None:
    from ..server.auth import ENV, check_exposure, parse_api_keys

    keys = {**parse_api_keys(os.environ.get(ENV, "")), **parse_api_keys(args.api_key)}
    check_exposure(args.host, keys)
    from ..server import ServerConfig, create_app
    from ..server.run import serve

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
        idle_seconds=_idle(args.idle),
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


def _serve_workers(args: argparse.Namespace, config: Any, store: Any) -> None:
    """``serve --workers N``: each worker process opens the store from its URL (``server.workers``)."""
    from dataclasses import replace

    from ..server.workers import serve_workers

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


def declare_ui(sub: Any) -> None:
    """``memstack ui``."""
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


def cmd_ui(args: argparse.Namespace) -> None:
    from ..server.ui.launch import open_dashboard

    store = open_store(args.db, home=args.home) if (args.db or args.home) else open_store(None)
    open_dashboard(
        store, tenant=args.tenant, model=_profile_model(args, store), port=args.port, browser=not args.no_browser, vectors=args.vectors
    )


def declare_chat(sub: Any) -> None:
    """``memstack chat``."""
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


def cmd_chat(args: argparse.Namespace) -> None:
    """Thin: the REPL is ``memstack.chat.run_chat``; rich is imported only here (the chat extra)."""
    from ..errors import require

    require("rich", extra="chat")
    from ..chat import run_chat
    from ..llm import get_chat_model

    model = get_chat_model(args.model or _profile_model(args))
    stack = {"layers": args.strategy} if args.strategy else {"preset": args.preset} if args.preset else {}
    with _memory(args, **stack, options={"model": model}, max_tokens=args.max_tokens) as mem:
        status = run_chat(mem, model, user_id=args.user, thread_id=args.thread)
    if status:
        sys.exit(status)


def declare_mcp(sub: Any) -> None:
    """``memstack mcp``."""
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


def cmd_mcp(args: argparse.Namespace) -> None:
    from ..mcp_server import serve
    from ..tools import memory_tools

    with _memory(args, options={"embedder": args.embedder} if args.embedder else None) as mem:
        tools = memory_tools(mem, args.user, args.thread, form=args.tools, agent_id=args.agent)
        serve(tools, transport=args.transport, host=args.host, port=args.port, allow_remote=args.allow_remote, log_level=args.log_level)
