"""The cost ceiling: a tenant's model-backed layer jobs wait once its budget for the period is spent.

What is spent is measured from the usage log (``stores.UsageLog.totals``: what the metered model
recorded), never from a counter of its own, so ``memstack usage`` and the ceiling agree. The
proxy's answers are recorded there too, as layer ``answer``: they never count against the layers'
budget, and the answer budget counts only them.

Reserve before running. Before a model-backed job runs (``JobRunner``), the worker reserves an
estimate of its tokens (``estimate``: its unconsumed messages plus ``allowance`` for instructions
and answer, never more than the limit itself) in the tenant's ledger, and the job runs only if

    spent in the period (usage log) + reserved by jobs running now + this estimate <= the limit

(for the tenant's limit and for the job's user's, each in its own period). After the job its
usage is in the log and the reservation is released. The ledger is one document per tenant in
the store's StateStore, changed by compare-and-set (``StateStore.swap``): on PostgreSQL a
conditional UPDATE, on SQLite a write transaction, on JSON lines the store's file lock, in memory a
lock. A reservation reads the ledger, then the usage, then swaps the ledger it read: a job that
released in between changed the ledger, so the swap fails and the decision is made again; a job
whose usage is not logged yet still holds its reservation. Hence the guarantee:

    the tokens spent in a period never exceed the limit by more than what the jobs running when it
    was reached spent beyond their reservations (with estimates that cover the jobs: never)

whatever the number of workers and processes. A job whose estimate exceeds the whole limit
reserves the limit: it runs only when nothing else is spent or held in its period. A worker killed
mid-job leaves its reservation until the job reruns (the same job replaces it) or ``hold_seconds``
pass.

A job that does not fit waits: the queue keeps it (``JobQueue.fail`` with the reason as its error,
``waiting: tenant budget 2,000,000 tokens/day reached, resumes 2026-12-06T00:00Z``) until the
period ends, looking again every ``recheck`` seconds (a budget raised by ``memstack init --budget``
applies then). The ledger keeps the last reason per tenant and user, for ``memstack config``,
``memstack usage``, REST and the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .costs import Budget, Limit
from .errors import Conflict
from .profile import Profile
from .stores import Store
from .tokens import get_counter
from .types import Job, Message, Scope, utcnow

#: the ledger's user id and state name, per tenant (never a name the REST state routes reach)
LEDGER_USER = "memstack.ceiling"
LEDGER_NAME = "memstack.ceiling"
#: the usage log's layer name of the proxy's answers
ANSWER_LAYER = "answer"
#: tokens reserved for a job beyond its messages: the instructions and the answer of one call
CALL_ALLOWANCE = 1500
HOLD_SECONDS = 3600.0
RECHECK_SECONDS = 300.0
_SWAP_TRIES = 64

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Spend:
    """One limit in its current period: tokens spent (the usage log) and held by running jobs."""

    limit: Limit
    user_id: str | None
    spent: int
    held: int
    start: datetime
    end: datetime

    @property
    def reached(self) -> bool:
        return self.spent + self.held >= self.limit.tokens

    def who(self) -> str:
        return "tenant budget" if self.user_id is None else f"user {self.user_id!r} budget"

    def reason(self, needs: int | None = None) -> str:
        """``waiting: tenant budget 2,000,000 tokens/day reached, resumes 2026-12-06T00:00Z (...)``."""
        detail = f"{self.spent:,} spent, {self.held:,} running" + (f"; the next job needs up to {needs:,}" if needs else "")
        return f"waiting: {self.who()} {self.limit.tokens:,} tokens/{self.limit.period} reached, resumes {stamp(self.end)} ({detail})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.limit.spec(),
            "user_id": self.user_id,
            "tokens": self.limit.tokens,
            "period": self.limit.period,
            "spent": self.spent,
            "running": self.held,
            "left": max(0, self.limit.tokens - self.spent - self.held),
            "reached": self.reached,
            "start": stamp(self.start),
            "resets": stamp(self.end),
        }


@dataclass(frozen=True, slots=True)
class Hold:
    """A job's reservation, released after it ran."""

    tenant: str
    key: str
    worker: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Wait:
    """Why a job (or an answer) may not spend now, and when it may again."""

    reason: str
    until: datetime
    retry_in: float


def stamp(at: datetime) -> str:
    """``2026-12-06T00:00Z``."""
    return at.strftime("%Y-%m-%dT%H:%MZ")


def job_key(job: Job) -> str:
    return "\x1f".join((*job.scope.key, job.layer))


def spends_tokens(layer: object) -> bool:
    """Whether a layer's jobs call a model (``spends_tokens`` on its class: the extractor)."""
    return bool(getattr(type(layer), "spends_tokens", False))


class Ceiling:
    """The cost ceilings of every tenant of one store (each tenant's from its profile's budget).
    ``clock``: the time periods are read at (tests inject one); ``recheck``: a waiting job is
    looked at again at least this often (None: only when its period ends). With ``recheck`` 0 (the
    tests', whose clock the queue does not share) a put-off job can be claimed again at once: the
    run that meets it again stops there (``JobRunner.run``), and the next run looks again."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = utcnow,
        recheck: float | None = RECHECK_SECONDS,
        allowance: int = CALL_ALLOWANCE,
        hold_seconds: float = HOLD_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.recheck = recheck
        self.allowance = allowance
        self.hold_seconds = hold_seconds
        self._counter = get_counter("estimate")

    # ---- what a tenant may spend -----------------------------------------------------------------

    def budget(self, tenant: str) -> Budget:
        """The tenant's budget from its profile (unlimited without one)."""
        profiles = getattr(self.store, "profiles", None)
        raw = profiles.get(tenant) if profiles is not None else None
        return Profile.from_dict(raw).budget if raw else Budget()

    def estimate(self, messages: Sequence[Message]) -> int:
        """A job's reservation: its messages' tokens and one call's instructions and answer."""
        return self.allowance + sum(self._counter.count(m.text) for m in messages)

    def spends(self, tenant: str, user_id: str | None = None, *, budget: Budget | None = None) -> list[Spend]:
        """The tenant's layer limits in their current periods (the per-user one for ``user_id``,
        or for every user who spent in it), then the answer limit for ``user_id``."""
        budget = budget if budget is not None else self.budget(tenant)
        now = self.clock()
        holds = _live(self._ledger(tenant)[1].get("holds", {}), now)
        out = []
        for limit in budget.layers:
            users = [user_id] if limit.per_user and user_id else self._spenders(tenant, limit, now) if limit.per_user else [None]
            out += [self._spend(tenant, limit, u, now, holds) for u in users]
        if budget.answers and user_id:
            out.append(self._spend(tenant, budget.answers, user_id, now, {}, answers=True))
        return out

    def waiting(self, tenant: str, user_id: str | None = None) -> list[str]:
        """Why the tenant's (and ``user_id``'s, or any user's) model-backed jobs wait now: the
        reasons recorded when jobs were put off, while their periods last."""
        now = self.clock()
        recorded = self._ledger(tenant)[1].get("waiting", {})
        return [
            w["reason"]
            for who, w in sorted(recorded.items())
            if datetime.fromisoformat(w["until"]) > now and (who == "" or user_id is None or who == user_id)
        ]

    # ---- the jobs ------------------------------------------------------------------------------------

    def reserve(self, job: Job, tokens: int) -> Hold | Wait | None:
        """Reserve ``tokens`` for a job about to run: a Hold (release it after the job), a Wait
        (the job must not run now), or None when the tenant has no layer limit."""
        tenant, user = job.scope.tenant, job.scope.user_id
        budget = self.budget(tenant)
        if not budget.layers:
            return None
        key = job_key(job)

        def decide(ledger: dict[str, Any], now: datetime) -> tuple[dict[str, Any], Hold | Wait]:
            holds = {k: h for k, h in _live(ledger.get("holds", {}), now).items() if k != key}  # a rerun replaces its old hold
            waiting = {w: v for w, v in ledger.get("waiting", {}).items() if datetime.fromisoformat(v["until"]) > now}
            reserved = min([tokens, *(x.tokens for x in budget.layers)])
            for limit in budget.layers:
                spend = self._spend(tenant, limit, user if limit.per_user else None, now, holds)
                if spend.spent + spend.held + reserved > limit.tokens:
                    reason = spend.reason(reserved)
                    waiting[user if limit.per_user else ""] = {"reason": reason, "until": spend.end.isoformat()}
                    left = (spend.end - now).total_seconds()
                    retry = left if self.recheck is None else min(left, self.recheck)
                    return {**ledger, "holds": holds, "waiting": waiting}, Wait(reason, spend.end, max(0.0, retry))
            until = now + timedelta(seconds=self.hold_seconds)
            holds[key] = {"user": user, "tokens": reserved, "worker": job.worker, "until": until.isoformat()}
            for who in ("", user):
                waiting.pop(who, None)
            return {**ledger, "holds": holds, "waiting": waiting}, Hold(tenant, key, job.worker, reserved)

        got: Hold | Wait = self._change(tenant, decide)
        return got

    def release(self, hold: Hold) -> None:
        """Drop a job's reservation (its usage is in the log by now)."""

        def drop(ledger: dict[str, Any], now: datetime) -> tuple[dict[str, Any] | None, None]:
            holds = dict(ledger.get("holds", {}))
            if holds.get(hold.key, {}).get("worker") != hold.worker:
                return None, None
            del holds[hold.key]
            return {**ledger, "holds": holds}, None

        self._change(tenant=hold.tenant, change=drop)

    # ---- the proxy's answers -------------------------------------------------------------------------

    def answer_wait(self, tenant: str, user_id: str) -> Wait | None:
        """A Wait when ``user_id`` has spent the tenant's answer budget in its period, else None.
        An answer that starts under the limit is finished (answers of one user at the same
        moment may pass it by their size)."""
        budget = self.budget(tenant)
        if budget.answers is None:
            return None
        now = self.clock()
        spend = self._spend(tenant, budget.answers, user_id, now, {}, answers=True)
        if not spend.reached:
            return None
        reason = (
            f"user {user_id!r} has spent the answer budget of {budget.answers.tokens:,} tokens/{budget.answers.period} "
            f"({spend.spent:,} spent); answers resume {stamp(spend.end)}"
        )
        return Wait(reason, spend.end, max(1.0, (spend.end - now).total_seconds()))

    # ---- the ledger and the usage log ----------------------------------------------------------------

    def _spend(
        self, tenant: str, limit: Limit, user_id: str | None, now: datetime, holds: dict[str, Any], *, answers: bool = False
    ) -> Spend:
        start, end = limit.window(now)
        usage = getattr(self.store, "usage", None)
        totals = usage.totals(tenant, since=start, until=end, user_id=user_id) if usage is not None else []
        spent = sum(t.tokens for t in totals if (t.layer == ANSWER_LAYER) == answers)
        held = sum(int(h["tokens"]) for h in holds.values() if user_id is None or h["user"] == user_id)
        return Spend(limit, user_id, spent, held, start, end)

    def _spenders(self, tenant: str, limit: Limit, now: datetime) -> list[str]:
        usage = getattr(self.store, "usage", None)
        if usage is None:
            return []
        start, end = limit.window(now)
        return sorted({t.user_id for t in usage.totals(tenant, since=start, until=end) if t.layer != ANSWER_LAYER})

    def _ledger(self, tenant: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        raw = self.store.state.get(Scope(user_id=LEDGER_USER, tenant=tenant), LEDGER_NAME)
        return raw, dict(raw or {})

    def _change(self, tenant: str, change: Callable[[dict[str, Any], datetime], tuple[dict[str, Any] | None, Any]]) -> Any:
        """Read the ledger, decide (reading the usage log after the ledger), and swap the ledger read
        for the decided one; again when another worker changed it meanwhile."""
        scope = Scope(user_id=LEDGER_USER, tenant=tenant)
        for _ in range(_SWAP_TRIES):
            raw, ledger = self._ledger(tenant)
            new, result = change(ledger, self.clock())
            if new is None:
                return result
            new["v"] = int(ledger.get("v", 0)) + 1  # every write differs from the one before (no A-B-A)
            if self.store.state.swap(scope, new, expect=raw, name=LEDGER_NAME):
                return result
        raise Conflict(f"tenant {tenant!r}'s budget ledger kept changing; the job stays queued")


def _live(holds: dict[str, Any], now: datetime) -> dict[str, Any]:
    return {k: h for k, h in holds.items() if datetime.fromisoformat(h["until"]) > now}


def report(ceiling: Ceiling, tenant: str, *, user_id: str | None = None, since: datetime | None = None) -> dict[str, Any]:
    """Spend vs budget for ``memstack usage``, REST and the dashboard: the tenant's budget, each
    limit in its current period, why jobs wait, and the tokens per user since ``since`` (None:
    ever), the layers' and the answers' apart."""
    usage = getattr(ceiling.store, "usage", None)
    totals = usage.totals(tenant, since=since, user_id=user_id) if usage is not None else []
    users: dict[str, dict[str, Any]] = {}
    for t in totals:
        row = users.setdefault(t.user_id, {"user_id": t.user_id, "calls": 0, "layer_tokens": 0, "answer_tokens": 0, "tokens": 0})
        row["calls"] += t.calls
        row["answer_tokens" if t.layer == ANSWER_LAYER else "layer_tokens"] += t.tokens
        row["tokens"] += t.tokens
    budget = ceiling.budget(tenant)
    return {
        "tenant": tenant,
        "user_id": user_id,
        "since": since.isoformat() if since else None,
        "budget": {**budget.to_dict(), "describe": budget.describe()},
        "limits": [s.to_dict() for s in ceiling.spends(tenant, user_id, budget=budget)],
        "waiting": ceiling.waiting(tenant, user_id),
        "users": list(users.values()),
    }


def render(data: dict[str, Any]) -> str:
    """``report``'s data as text: the budget, each limit, the reasons jobs wait, a table per user."""
    lines = [f"tenant {data['tenant']}: budget {data['budget']['describe']}"]
    for x in data["limits"]:
        who = f"user {x['user_id']}" if x["user_id"] else "tenant"
        lines.append(
            f"  {who:<20} {x['spent']:>12,} spent {x['running']:>9,} running of {x['tokens']:,}/{x['period']}  resets {x['resets']}"
        )
    lines += [f"  {w}" for w in data["waiting"]]
    if data["users"]:
        lines.append(f"{'user':<24} {'calls':>7} {'layers':>12} {'answers':>12} {'tokens':>12}")
        for u in data["users"]:
            lines.append(f"{u['user_id']:<24} {u['calls']:>7,} {u['layer_tokens']:>12,} {u['answer_tokens']:>12,} {u['tokens']:>12,}")
    else:
        lines.append("(no model calls" + (f" since {data['since']})" if data["since"] else ")"))
    return "\n".join(lines)
