"""The retention pass: a tenant's policy (``memstack.retention``) applied to a store, and the record
of its last run.

A pass reads the tenant's policy from its memory profile, turns it into cutoffs at ``now``
(``Retention.expiry``) and has the store delete what is older (``Store.expire``: one transaction
and one deletion note per user, by ``retention``). The worker runs it at most once per ``EVERY``
per tenant (``run_due``), ``memstack retention run`` on demand (cron). A pass is idempotent: two
workers that run one at once delete each row once, and the second leaves no note for what the
first deleted; the interval only spares the store needless scans.

With the vectors in an index outside the store (Milvus, ``Memory(vectors=...)``), the units a pass
deletes lose their vectors there too: the pass lists the tenant's unit ids before and after (a scan
of the tenant's units, made only then) and deletes the difference from the index, so an expired
message leaves no embedding behind anywhere. The store's own index goes in the store's transaction.

The last run (when, what policy, how many users and rows of what) is kept in the store's profile
store under ``RECORD_PREFIX`` + the tenant, a name no tenant can have (a tenant id holds no
control character), so every process (``memstack config``, the REST API, the dashboard) sees it.
A tenant whose policy keeps everything is never passed over and has no record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidInput
from .profile import Profile
from .retention import Retention
from .stores import Store, VectorIndex
from .types import Scope, aware, utcnow

#: the worker passes over a tenant at most this often
EVERY = timedelta(hours=1)
#: the profile store's key of a tenant's last run: this, then the tenant
RECORD_PREFIX = "retention\x1f"
#: who a pass's deletion notes name
LAYER = "retention"


@dataclass(frozen=True, slots=True)
class RetentionRun:
    """One pass over a tenant: when, under what policy, the users it deleted something of and the
    rows it deleted by what they were (``backends.deletions.COUNTED``)."""

    tenant: str
    at: datetime
    policy: Retention
    users: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "at": self.at.isoformat(),
            "policy": self.policy.to_dict(),
            "users": self.users,
            "rows": self.rows,
            "counts": dict(self.counts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetentionRun:
        return cls(
            data["tenant"],
            datetime.fromisoformat(data["at"]),
            Retention.from_dict(data.get("policy")),
            int(data.get("users", 0)),
            {str(k): int(v) for k, v in (data.get("counts") or {}).items()},
        )

    def describe(self) -> str:
        """One line: "2026-12-05 10:00 UTC: 3 users, 41 rows (messages 30, units 11)"."""
        what = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        users = f"{self.users} user" + ("" if self.users == 1 else "s")
        rows = f"{self.rows} row" + ("" if self.rows == 1 else "s")
        return f"{self.at:%Y-%m-%d %H:%M} UTC: {users}, {rows}" + (f" ({what})" if what else "")


def policy_of(store: Store, tenant: str) -> Retention:
    """The tenant's retention policy (keep everything when it has no profile or no policy)."""
    profiles = getattr(store, "profiles", None)
    raw = profiles.get(tenant) if profiles is not None else None
    return Profile.from_dict(raw).retention if raw is not None else Retention()


def last_run(store: Store, tenant: str) -> RetentionRun | None:
    """The tenant's last pass, None when there was none."""
    Scope(user_id="probe", tenant=tenant)  # a valid tenant: the record's key is no other tenant's
    profiles = getattr(store, "profiles", None)
    raw = profiles.get(RECORD_PREFIX + tenant) if profiles is not None else None
    return RetentionRun.from_dict(raw) if raw is not None else None


def run(
    store: Store, tenant: str, *, now: datetime | None = None, layer: str = LAYER, index: VectorIndex | None = None
) -> RetentionRun | None:
    """Apply the tenant's policy at ``now`` (default: the clock's) and record the run; None, with
    nothing done, when the policy keeps everything. ``index``: the vectors' index when it is not
    the store's own (the units the pass deletes are deleted from it too)."""
    at = aware(now, field_name="now") if now is not None else utcnow()
    policy = policy_of(store, tenant)
    if policy.keeps_everything:
        return None
    outside = index is not None and index is not getattr(store, "vectors", None) and policy.derived and policy.messages is not None
    before = _unit_ids(store, tenant) if outside else {}
    notes = store.expire(tenant, policy.expiry(at), layer=layer)
    counts: dict[str, int] = {}
    for note in notes:
        for what, n in note.counts.items():
            counts[what] = counts.get(what, 0) + n
    if outside and notes and index is not None:
        after = _unit_ids(store, tenant)
        for user_id, ids in before.items():
            gone = sorted(ids - after.get(user_id, set()))
            if gone:
                counts["vectors"] = counts.get("vectors", 0) + index.delete(Scope(user_id=user_id, tenant=tenant), gone)
    done = RetentionRun(tenant, at, policy, len(notes), counts)
    store.profiles.put(RECORD_PREFIX + tenant, done.to_dict(), replace=True)
    return done


def run_due(
    store: Store, tenants: Iterable[str], *, every: timedelta = EVERY, now: datetime | None = None, index: VectorIndex | None = None
) -> list[RetentionRun]:
    """A pass over each of ``tenants`` whose policy limits something and whose last pass is at
    least ``every`` old (the worker's periodic pass); the runs made."""
    if every < timedelta(0):
        raise InvalidInput("the interval between retention passes must be >= 0", field="every")
    at = aware(now, field_name="now") if now is not None else utcnow()
    done = []
    for tenant in tenants:
        last = last_run(store, tenant)
        if last is not None and at - last.at < every:
            continue
        made = run(store, tenant, now=at, index=index)
        if made is not None:
            done.append(made)
    return done


def _unit_ids(store: Store, tenant: str) -> dict[str, set[str]]:
    """The ids of the tenant's units, by user (none for a store without units)."""
    units = getattr(store, "units", None)
    if units is None:
        return {}
    found: dict[str, set[str]] = {}
    for user_id in units.users(tenant):
        for batch in units.iterate(Scope(user_id=user_id, tenant=tenant)):
            found.setdefault(user_id, set()).update(u.id for u in batch)
    return found
