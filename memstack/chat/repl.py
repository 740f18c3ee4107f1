"""The chat loop: read a line, run a command or ask the model, show the result; errors of the one
error tree are one red line and the loop goes on (a chat must survive a dead endpoint).

``run_chat`` takes the Memory, the model and, for tests, the console and the line reader, so that
the whole REPL runs in-process with a scripted model and a console writing to a StringIO.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape

from ..errors import MemstackError
from ..llm.base import ChatModel
from ..memory import Memory
from . import panels
from .panels import plural
from .progress import Drained, drain, lazy_bar, prepare_model, run_queue
from .session import ChatSession

#: ``read_line(prompt) -> line``; raises EOFError at the end of input (Ctrl-D)
ReadLine = Callable[[str], str]
PROMPT = "[bold cyan]you ›[/] "


class Quit(Exception):
    """Raised by /quit to leave the loop the same way as Ctrl-D."""


def run_chat(
    memory: Memory,
    model: ChatModel,
    *,
    user_id: str,
    thread_id: str | None = None,
    console: Console | None = None,
    read_line: ReadLine | None = None,
) -> int:
    """Chat until /quit or end of input, then drain the user's write queue; returns the exit
    status (0; 1 when jobs failed in the final drain). The memory's background worker runs
    meanwhile, so that retrieval and the model-backed layers keep up with the conversation; build
    it with ``options={"model": model}`` so that one model answers and extracts (the local model's
    lock serialises the two)."""
    console = console or Console()
    read = read_line or (lambda prompt: console.input(prompt))
    session = ChatSession(memory, model, user_id=user_id, thread_id=thread_id)
    prepare_model(model, console)
    console.print(panels.banner(session.user_id, session.thread_id, memory.layers, model.name))
    with _logs_to(console):
        memory.start_worker()
        _loop(session, console, read)
        report = drain(memory, session.user_id, console)
    for error in report.errors:
        console.print(f"[red]{escape(error)}[/]")
    left = " (interrupted: the rest stays queued for `memstack worker`)" if report.interrupted else ""
    console.print(f"[dim]memory work done: {plural(report.ran, 'job')}, {report.failed} failed{left}. Bye.[/]")
    return 1 if report.failed else 0


def _loop(session: ChatSession, console: Console, read: ReadLine) -> None:
    while True:
        try:
            line = read(PROMPT).strip()
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print("\n[dim](/quit or Ctrl-D to leave)[/]")
            continue
        if not line:
            continue
        try:
            _handle(session, console, read, line)
        except Quit:
            return
        except MemstackError as exc:
            console.print(f"[red]error: {escape(str(exc))}[/]")
        except OSError as exc:  # a file /import could not read
            console.print(f"[red]error: {escape(str(exc))}[/]")
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")


def _handle(session: ChatSession, console: Console, read: ReadLine, line: str) -> None:
    if not line.startswith("/"):
        _ask(session, console, line)
        return
    command, _, rest = line.partition(" ")
    handler = COMMANDS.get(command.lower())
    if handler is None:
        console.print(f"[yellow]unknown command {escape(command)}: /help lists them[/]")
        return
    handler(session, console, read, rest.strip())


def _ask(session: ChatSession, console: Console, line: str) -> None:
    with console.status("thinking…"):
        text = session.ask(line)
    console.print(panels.answer(text, session.model.name))


def _context(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    console.print(panels.context_view(session.last_context, session.memory.counter))


def _memories(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    console.print(panels.memories_view(session.memories()))


def _state(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    console.print(panels.state_view(session.state()))


def _forget(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    everything = rest.lower() == "all"
    if rest and not everything:
        console.print("[yellow]/forget deletes this thread; /forget all deletes you and everything you own[/]")
        return
    what = f"user {session.user_id!r} and everything they own" if everything else f"thread {session.thread_id!r} (its messages and summary)"
    try:
        answer = read(escape(f"Delete {what}? [y/N] ")).strip().lower()
    except EOFError:
        answer = ""
    if answer not in ("y", "yes"):
        console.print("nothing deleted")
        return
    console.print(f"deleted {escape(what)}: {plural(session.forget(everything=everything), 'record')}")


def _flush(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    # the background worker is stopped meanwhile: a job it held at that moment (looking at a batch
    # not yet full) was not this run's to claim, so /flush ran nothing and the exit drain later
    # hit the failure /flush should have reported (a race seen in CI under load)
    running = session.memory.worker_running
    with console.status("making memories from the waiting turns…"):
        session.memory.stop_worker(drain=False)
        try:
            report = run_queue(session.memory, session.user_id, Drained())
        finally:
            if running:
                session.memory.start_worker()
    for error in report.errors:
        console.print(f"[red]error: {escape(error)}[/]")
    console.print(f"ran {plural(report.ran, 'job')}, {report.failed} failed")


def _import(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    if not rest:
        console.print("[yellow]usage: /import FILE (a JSON-lines export, as `memstack export` writes)[/]")
        return
    with lazy_bar(console, f"importing {rest}") as update:
        stored = session.import_file(rest, progress=update)
    console.print(f"imported {plural(stored, 'message')} as {escape(session.user_id)}'s; the background worker indexes them")


def _help(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    console.print(panels.help_table())


def _quit(session: ChatSession, console: Console, read: ReadLine, rest: str) -> None:
    raise Quit


COMMANDS: dict[str, Callable[[ChatSession, Console, ReadLine, str], None]] = {
    "/context": _context,
    "/memories": _memories,
    "/state": _state,
    "/forget": _forget,
    "/flush": _flush,
    "/import": _import,
    "/help": _help,
    "/quit": _quit,
    "/exit": _quit,
}


class _ConsoleHandler(logging.Handler):
    """The background worker's log lines (a job that failed and will be retried) as one coloured
    line on the chat's console, never a traceback across the conversation. Records from the
    REPL's own thread are skipped: the work it runs itself (/flush, the exit drain) reports its
    errors as red lines already."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.WARNING)
        self.console = console
        self.owner = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.owner:
            return
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {record.exc_info[1]}"
        style = "red" if record.levelno >= logging.ERROR else "yellow"
        self.console.print(f"[{style}]{escape(text)}[/]")


@contextmanager
def _logs_to(console: Console) -> Iterator[None]:
    log = logging.getLogger("memstack")
    handler, propagate = _ConsoleHandler(console), log.propagate
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.propagate = propagate
