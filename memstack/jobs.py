"""The write queue's runner: claims the layers' write-side jobs from the store's durable queue
(``stores.JobQueue``) and runs them, each under a lease renewed while it runs (``leases``), and
the background worker thread that drains the queue when ``Memory.add`` wakes it.

A job that fails is recorded on the job with its error and retried with backoff (at most an hour
apart): no turn is lost. The store records a job done only while this worker still holds it, so a
job whose lease passed to another worker, or whose thread was deleted, is not recorded twice.
``Memory`` holds one ``JobRunner`` and keeps its API (``run_jobs``, ``flush``, ``start_worker``,
``stop_worker``, ``worker_running``); ``memstack worker`` runs the same runner in its own process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from .ceiling import Ceiling, Hold, Wait, spends_tokens
from .errors import MemstackError
from .layers.base import Layer, Waiting, Writer, WriteRequest
from .leases import Leases, describe, worker_name
from .replaced import visible
from .stores import Store
from .types import Job, Scope

log = logging.getLogger("memstack")

#: how long a thread stays quiet before the turns held back for a fuller batch run without a flush:
#: long enough that a conversation going on fills its batch (one model call per batch), short
#: enough that a session's facts reach the summary and the profile soon after it ends
IDLE_SECONDS = 300.0

#: ``progress(done, total, job)``: called after each job a run claimed
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class JobReport:
    """What a run of the write queue did."""

    ran: int = 0
    failed: int = 0
    errors: tuple[str, ...] = field(default_factory=tuple)
    #: jobs put off because their tenant's (or user's) budget is spent (``memstack.ceiling``)
    waited: int = 0


class JobRunner:
    """Runs the queued jobs of one store. ``layer(name)``: the layer a job's name (``job.layer``,
    which may carry its configuration after a colon) runs as, built by the Memory."""

    def __init__(
        self,
        store: Store,
        layer: Callable[[str], Layer],
        lease_seconds: float,
        ceiling: Ceiling | None = None,
        maintain: Callable[[], object] | None = None,
        idle_seconds: float | None = IDLE_SECONDS,
    ) -> None:
        self.store = store
        #: a thread quiet this long has the turns its layers held back for a fuller batch run, as
        #: at a flush (a short session is summarised and profiled without one); None: only a flush
        self.idle_seconds = idle_seconds
        #: the tenants' cost ceilings: a model-backed job that does not fit waits (``memstack.ceiling``)
        self.ceiling = ceiling or Ceiling(store)
        #: called by the background worker before each look at the queue (the retention pass,
        #: which throttles itself); a failure is logged, the worker goes on
        self.maintain = maintain
        self.lease_seconds = lease_seconds
        self._layer = layer
        self._leases = Leases(store.jobs, lease_seconds)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    def run(
        self,
        *,
        final: bool = False,
        max_jobs: int | None = None,
        scope: Scope | None = None,
        worker: str | None = None,
        progress: Progress | None = None,
    ) -> JobReport:
        """Claim and run queued jobs (of ``scope``'s user, or all) until none is ready (or
        ``max_jobs`` ran). ``final``: a job waiting for its batch to fill runs now. ``progress``
        after each job; the total is what was pending, counted again when more arrived."""
        worker = worker or worker_name("run")
        ran = failed = waited = 0
        errors: list[str] = []
        put_off: set[tuple[tuple[str, str, str, str], str]] = set()
        total = self.store.jobs.pending(scope) if progress else 0
        self._leases.start()
        while max_jobs is None or ran + failed < max_jobs:
            job = self.store.jobs.claim(
                worker=worker,
                lease_seconds=self.lease_seconds,
                scope=scope,
                waiting=final,
                idle_seconds=None if final else self.idle_seconds,
            )
            if job is None:
                break
            error = self.run_one(job, final or job.final)
            if isinstance(error, Wait):
                waited += 1
                if (job.scope.key, job.layer) in put_off:
                    break  # a job this run put off is back already (its wait was short): the next run looks again
                put_off.add((job.scope.key, job.layer))
                continue
            if error is None:
                ran += 1
            else:
                failed += 1
                errors.append(error)
            if progress:
                total = max(total, ran + failed + self.store.jobs.pending(scope))
                progress(ran + failed, total, f"{job.layer.split(':')[0]} {job.scope.user_id}/{job.scope.thread_id}")
        return JobReport(ran, failed, tuple(errors), waited)

    def run_one(self, job: Job, final: bool) -> str | Wait | None:
        """Run one claimed job, its lease renewed while it runs (``leases.Leases``); the store
        records it done only if this worker still holds it. Returns the error, None on success,
        or the Wait of a model-backed job whose tenant's budget does not hold it now (the job
        stays queued, with the reason as its error, until its period ends: ``memstack.ceiling``)."""
        try:
            with self._leases.hold(job):
                layer = self._layer(job.layer)
                messages = visible(self.store.history.read(job.scope, after=job.cursor))
                hold = self.ceiling.reserve(job, self.ceiling.estimate(messages)) if spends_tokens(layer) else None
                if isinstance(hold, Wait):
                    self.store.jobs.fail(job, hold.reason, retry_in=hold.retry_in)
                    return hold
                try:
                    consumed = (
                        layer.write(WriteRequest(job.scope, messages, final, self.store, job.cursor)) if isinstance(layer, Writer) else None
                    )
                finally:
                    if isinstance(hold, Hold):
                        self.ceiling.release(hold)
            if isinstance(consumed, Waiting):
                recorded = self.store.jobs.complete(job, cursor=consumed.cursor, waiting=True)
            else:
                cursor = consumed if consumed is not None else (messages[-1].seq if messages else job.cursor)
                recorded = self.store.jobs.complete(job, cursor=cursor or 0)
            if not recorded:
                log.warning(
                    "%s ran, but the job is no longer this worker's (its lease passed to another worker, or the thread was deleted): not recorded",
                    describe(job),
                )
            return None
        except Exception as exc:  # recorded on the job and retried with backoff: never lost
            error = f"{job.layer} for {job.scope.user_id}/{job.scope.thread_id}: {type(exc).__name__}: {exc}"
            attempts = 0 if (job.last_error or "").startswith("waiting:") else job.attempts  # a budget wait is no failed attempt
            retry = min(3600.0, 2.0 ** min(attempts + 1, 12))
            log.warning("job failed (attempt %d, retry in %.0fs): %s", job.attempts + 1, retry, error)
            try:
                self.store.jobs.fail(job, error, retry_in=retry)
            except MemstackError:
                log.exception("could not record the failure; the lease will expire and the job rerun")
            return error

    # ---- the background worker -------------------------------------------------------------

    def start(self, *, poll_seconds: float = 1.0) -> None:
        """Drain the queue in a daemon thread, woken by ``wake`` (and every ``poll_seconds``)."""
        if self._worker is not None:
            return
        self._stop.clear()
        name = worker_name("bg")

        def loop() -> None:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    if self.maintain is not None:
                        self.maintain()
                    self.run(worker=name)
                except MemstackError:
                    log.exception("background worker: store failure; retrying")
                self._wake.wait(poll_seconds)

        self._worker = threading.Thread(target=loop, name="memstack-worker", daemon=True)
        self._worker.start()

    @property
    def running(self) -> bool:
        """Whether the background worker is running."""
        return self._worker is not None

    def wake(self) -> None:
        """New work was queued: the background worker (if running) looks now."""
        if self._worker is not None:
            self._wake.set()

    def stop(self, *, drain: bool = True) -> None:
        """Stop the background worker (waiting for the job it runs); ``drain``: then run what is
        ready in this thread."""
        if self._worker is None:
            return
        self._stop.set()
        self._wake.set()
        self._worker.join()
        self._worker = None
        if drain:
            self.run()
