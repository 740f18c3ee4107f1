"""A test layer whose write side records every run in a log outside the store, so that a test can
see which process ran which job when: two runs of one job at once, a run that never ended (its
process was killed), a message processed by two finished runs.

Each run appends JSON lines to the file named by $MEMSTACK_RUN_LOG (O_APPEND: whole lines from
any number of processes): ``start`` (with the ids it was given), one ``msg`` per message after
its ``delay`` seconds of "work" ($MEMSTACK_RUN_SLOW in a slow process), and ``end``. Registered as ``runlog`` through the real registry;
``python tests/run_probe.py ARGS`` is the ``memstack`` command with it registered (the worker
processes of ``serve --workers N`` import this file again as their main module, so they have it
too).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from memstack.layers import register_layer
from memstack.layers.base import LayerOutput, ReadRequest, WriteRequest
from memstack.types import Message

ENV = "MEMSTACK_RUN_LOG"
#: seconds per message in this process instead of the layer's ``delay``: a slow worker
SLOW_ENV = "MEMSTACK_RUN_SLOW"


@dataclass(frozen=True)
class RunLog:
    delay: float = 0.0
    name: str = "runlog"
    scope: str = "thread"
    history: str = "none"

    def read(self, request: ReadRequest, messages: list[Message]) -> LayerOutput:
        return LayerOutput(messages)

    def write(self, request: WriteRequest) -> int | None:
        run = uuid.uuid4().hex
        key = "/".join(request.scope.key)
        record({"run": run, "event": "start", "key": key, "ids": [m.id for m in request.messages]})
        delay = float(os.environ.get(SLOW_ENV) or self.delay)
        for m in request.messages:
            time.sleep(delay)
            record({"run": run, "event": "msg", "key": key, "ids": [m.id]})
        record({"run": run, "event": "end", "key": key})
        return None


def record(event: dict) -> None:
    line = json.dumps({**event, "pid": os.getpid(), "t": time.time()}) + "\n"
    fd = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@dataclass
class Run:
    run: str
    pid: int
    key: str
    start: float
    last: float
    ids: list[str]
    done: list[str] = field(default_factory=list)
    ended: bool = False


def read_runs(path: Path) -> list[Run]:
    runs: dict[str, Run] = {}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "start":
            runs[e["run"]] = Run(e["run"], e["pid"], e["key"], e["t"], e["t"], e["ids"])
            continue
        run = runs[e["run"]]
        run.last = e["t"]
        if e["event"] == "msg":
            run.done += e["ids"]
        else:
            run.ended = True
    return list(runs.values())


def overlapping(runs: list[Run], killed: dict[int, float]) -> list[tuple[Run, Run]]:
    """Pairs of runs of one job (one thread) that ran at the same time. A run that never ended
    lasted until its process was killed (``killed``: pid -> when), else until its last event."""
    by_key: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_key[r.key].append(r)
    pairs = []
    for same in by_key.values():
        same.sort(key=lambda r: r.start)
        for i, b in enumerate(same):
            pairs += [(a, b) for a in same[:i] if b.start < end_of(a, killed)]
    return pairs


def end_of(run: Run, killed: dict[int, float]) -> float:
    return run.last if run.ended else max(run.last, killed.get(run.pid, run.last))


register_layer("runlog", RunLog)

if __name__ == "__main__":
    from memstack.cli import main

    sys.exit(main())
