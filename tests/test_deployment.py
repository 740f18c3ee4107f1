"""Several processes on one store: ``memstack serve`` (separate processes and ``--workers N``) and
``memstack worker`` processes sharing one PostgreSQL (or one SQLite file), as docs/scaling.md
describes. The write queue's leases (no job runs twice at once; a killed worker's job reruns
elsewhere after its lease), the store-level de-duplication of the proxy and of Idempotency-Key,
and an audit after concurrent clients and a SIGKILL: every acknowledged message stored once,
every thread as its client saw it, every job done exactly once.

Runs are observed from outside the store: the ``runlog`` layer (tests/run_probe.py) appends
every run's start, messages and end to a file, from every process.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import run_probe

from memstack import Memory

HERE = Path(__file__).parent


@pytest.fixture
def run_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.jsonl"
    path.touch()
    monkeypatch.setenv(run_probe.ENV, str(path))
    return path


# ---- leases, in one process -------------------------------------------------------------------


def test_a_job_slower_than_its_lease_keeps_it_and_runs_once(tmp_path, run_log):
    """The heartbeat: a job of 1.5 s on a lease of 0.6 s stays its worker's; a second worker
    polling all the while gets nothing, and the job runs once (without the renewal the second
    worker took it after 0.6 s and both ran it at once)."""
    db = tmp_path / "lease.db"
    options = {"runlog.delay": 0.1}
    with Memory(db, layers=["runlog"], options=options) as m:
        m.add([f"第{i}条" for i in range(15)], user_id="u", thread_id="t")
    first = Memory(db, options=options, lease_seconds=0.6)
    second = Memory(db, options=options, lease_seconds=0.6)
    try:
        runner = threading.Thread(target=first.run_jobs, kwargs={"max_jobs": 1})
        runner.start()
        while not run_probe.read_runs(run_log):
            time.sleep(0.01)
        stolen = 0
        while runner.is_alive():
            stolen += second.run_jobs(max_jobs=1).ran
            time.sleep(0.05)
        runner.join()
        runs = run_probe.read_runs(run_log)
        assert stolen == 0 and len(runs) == 1 and runs[0].ended and len(runs[0].done) == 15
        assert first.pending() == 0
    finally:
        first.close()
        second.close()
