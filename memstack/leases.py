"""Running jobs keep their leases: one heartbeat thread renews the leases of a Memory's jobs.

The write queue (``stores.JobQueue``) leases each claimed job to one worker for ``lease_seconds``;
a worker that dies loses it then, and another worker reruns the job. A worker that lives keeps it:
while a layer's write runs (a model call can take minutes), ``Leases`` renews the lease, so no
second worker claims a job whose first worker is only slow. Without the renewal a job longer than
its lease was taken by a second worker while the first still ran it. Should a renewal find the
job taken (the worker stalled past its lease: a stopped process, a lost database), the hold is
marked ``lost``; the job's ``complete`` is then refused by the store, and the worker that holds
the job records it.

    leases = Leases(store.jobs, lease_seconds=300)
    leases.start()                      # before claiming
    job = store.jobs.claim(worker=..., lease_seconds=300)
    with leases.hold(job) as held:
        layer.write(...)
    if held.lost: ...

One thread per ``Leases`` (started with the first hold, ended after two beats with none held),
not one per job: holding a job costs a dictionary entry (a thread per job slowed every short job
enough to change which worker took the next one).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .errors import MemstackError
from .stores import JobQueue
from .types import Job

log = logging.getLogger("memstack")


def worker_name(role: str) -> str:
    """A worker id unique to this run: host, process, ``role`` and a random tag (two Memory
    objects in one process, or a pid reused after a restart, never share one)."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


@dataclass
class Held:
    """A job whose lease is being renewed; ``lost``: a renewal found it another worker's."""

    job: Job
    renewed: float = field(default_factory=time.monotonic)
    lost: bool = False


class Leases:
    """Renews the lease of every job held, about every third of ``lease_seconds``."""

    def __init__(self, jobs: JobQueue, lease_seconds: float) -> None:
        self.jobs = jobs
        self.lease_seconds = lease_seconds
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the heartbeat thread if it is not running: before claiming, so that a job's
        hold never waits for a thread to start."""
        if self.lease_seconds <= 0:
            return
        with self._lock:
            self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="memstack-leases", daemon=True)
            self._thread.start()

    @contextmanager
    def hold(self, job: Job) -> Iterator[Held]:
        held = Held(job)
        if self.lease_seconds <= 0:  # a lease that ends at once is never renewed
            yield held
            return
        with self._lock:
            self._held[id(held)] = held
            self._start()
        try:
            yield held
        finally:
            with self._lock:
                self._held.pop(id(held), None)

    def _beat(self) -> None:
        idle = 0
        while True:
            time.sleep(self.lease_seconds / 3)
            with self._lock:
                held = list(self._held.values())
                idle = 0 if held else idle + 1
                if idle > 1:  # a whole third with nothing held: end; the next hold starts another
                    self._thread = None
                    return
            for h in held:
                self._renew(h)

    def _renew(self, held: Held) -> None:
        """Renew one job's lease if a sixth of it has passed since the last renewal (a job held
        just before this beat waits for the next: it has at least two thirds left)."""
        now = time.monotonic()
        if held.lost or now - held.renewed < self.lease_seconds / 6:
            return
        try:
            if self.jobs.renew(held.job, lease_seconds=self.lease_seconds):
                held.renewed = now
                return
        except MemstackError as exc:  # the store is unreachable: try again at the next beat
            log.warning("could not renew the lease of %s: %s", describe(held.job), exc)
            return
        held.lost = True
        log.warning(
            "lost the lease of %s: another worker holds it now (or its thread was deleted); this run's result is not recorded",
            describe(held.job),
        )


def describe(job: Job) -> str:
    return f"job {job.layer} for {job.scope.user_id}/{job.scope.thread_id}"
