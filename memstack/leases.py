"""A running job keeps its lease: a heartbeat thread renews it every third of the lease.

The write queue (``stores.JobQueue``) leases each claimed job to one worker for ``lease_seconds``;
a worker that dies loses it then, and another worker reruns the job. A worker that lives keeps it:
while the layer's write runs (a model call can take minutes), ``Heartbeat`` renews the lease, so
no second worker claims a job whose first worker is only slow. Should a renewal find the job
taken (the worker stalled past its lease: a stopped process, a lost database), ``lost`` is set;
the job's ``complete`` is then refused by the store, and the worker that holds it records it.

    with Heartbeat(store.jobs, job, lease_seconds=300) as beat:
        layer.write(...)
    if beat.lost: ...
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from .errors import MemstackError
from .stores import JobQueue
from .types import Job

log = logging.getLogger("memstack")


def worker_name(role: str) -> str:
    """A worker id unique to this run: host, process, ``role`` and a random tag (two Memory
    objects in one process, or a pid reused after a restart, never share one)."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


class Heartbeat:
    """Renew ``job``'s lease every ``lease_seconds / 3`` until the block ends."""

    def __init__(self, jobs: JobQueue, job: Job, lease_seconds: float) -> None:
        self.jobs = jobs
        self.job = job
        self.lease_seconds = lease_seconds
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if self.lease_seconds > 0:
            self._thread = threading.Thread(target=self._beat, name="memstack-lease", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                if self.jobs.renew(self.job, lease_seconds=self.lease_seconds):
                    continue
            except MemstackError as exc:  # the store is unreachable: try again at the next beat
                log.warning("could not renew the lease of %s: %s", describe(self.job), exc)
                continue
            self.lost = True
            log.warning("lost the lease of %s: another worker holds it now (or its thread was deleted); this run's result is not recorded", describe(self.job))
            return


def describe(job: Job) -> str:
    return f"job {job.layer} for {job.scope.user_id}/{job.scope.thread_id}"
