"""Per user and kind, a count and a content digest of what a store holds, and the differences of
two stores: what ``memstack verify`` prints and ``copy`` checks at its end.

The digest of a kind is the sum, modulo 2**256, of the SHA-256 of each item's canonical JSON:
independent of order (backends list some kinds in different orders) and computed in constant
memory. Canonical: keys sorted, times in UTC, and what a store assigns of its own dropped (a
message's seq, a checkpoint's id, where a profile says the vectors are kept); vectors rounded to 5 decimals (float32 kept as float32).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from ..stores import Store, VectorIndex
from ..types import Scope, parse_time
from . import langgraph, notes
from .items import DELETION, KINDS, PROFILE
from .source import user_items

#: the fields that hold a time, per kind
TIMES = {
    "message": ("timestamp",),
    "checkpoint": ("created_at",),
    "record": ("valid_from", "invalid_at", "created_at"),
    "audit": ("at",),
    "usage": ("at",),
    "unit": ("timestamp",),
    "deletion": ("at",),
}
MODULUS = 2**256


@dataclass(frozen=True)
class Summary:
    """What a store holds of one kind for one user."""

    count: int
    digest: str


@dataclass(frozen=True)
class Difference:
    """One kind of one user that two stores hold differently (``user`` "*" for the tenant's
    profile and deletion notes)."""

    user: str
    kind: str
    source: Summary
    destination: Summary

    def __str__(self) -> str:
        who = "the tenant's" if self.user == "*" else f"user {self.user!r}:"
        if self.source.count != self.destination.count:
            return f"{who} {self.kind}: {self.source.count} in the source, {self.destination.count} in the destination"
        return f"{who} {self.kind}: the same count ({self.source.count}) but different content"


def canonical(kind: str, item: Mapping[str, Any]) -> str:
    """The item as the digest sees it (see the module docstring)."""
    data = dict(item)
    for name in TIMES.get(kind, ()):
        if data.get(name) is not None:
            data[name] = parse_time(str(data[name]), field_name=name).astimezone(UTC).isoformat()
    if kind == "checkpoint":
        data.pop("id", None)
    if kind == PROFILE:  # where the vectors are kept is the deployment's, not the tenant's memory
        data.pop("vectors", None)
        data.pop("version", None)
    if kind == "vector":
        data["vector"] = [round(float(x), 5) + 0.0 for x in data["vector"]]
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _fold(digest: int, kind: str, item: Mapping[str, Any]) -> int:
    return (digest + int.from_bytes(hashlib.sha256(canonical(kind, item).encode()).digest(), "big")) % MODULUS


def user_digest(store: Store, user: Scope, *, index: VectorIndex | None = None) -> dict[str, Summary]:
    """{kind: Summary} for every kind in ``items.KINDS`` (zero counts included)."""
    counts = dict.fromkeys(KINDS, 0)
    sums = dict.fromkeys(KINDS, 0)
    for kind, batch in user_items(store, user, index=index):
        for item in batch:
            counts[kind] += 1
            sums[kind] = _fold(sums[kind], kind, item)
    return {k: Summary(counts[k], f"{sums[k]:064x}") for k in KINDS}


def digests(
    store: Store,
    tenant: str,
    users: Sequence[str],
    *,
    index: VectorIndex | None = None,
    noted: Sequence[str] | None = None,
    deletions: bool = True,
) -> dict[str, dict[str, Summary]]:
    """{user: {kind: Summary}} for these users, and under "*" the tenant's profile, (unless not
    ``deletions``) the deletion notes of the ``noted`` users (None: every note of the tenant, the
    hashes included: a copy keeps the source's key, so equal notes are equal verbatim), and the
    LangGraph rows of the ``noted`` users' threads (None: all of the tenant's, ``langgraph``)."""
    profile = store.profiles.get(tenant)
    out = {"*": {PROFILE: Summary(int(profile is not None), f"{_fold(0, PROFILE, profile or {}):064x}")}}
    if deletions:
        held = notes.items(store, tenant, noted)
        total = 0
        for item in held:
            total = _fold(total, DELETION, item)
        out["*"][DELETION] = Summary(len(held), f"{total:064x}")
    count, total = 0, 0
    for item in langgraph.digest_items(store, tenant, noted):
        count, total = count + 1, _fold(total, langgraph.KIND, item)
    out["*"][langgraph.KIND] = Summary(count, f"{total:064x}")
    for user in users:
        out[user] = user_digest(store, Scope(user_id=user, tenant=tenant), index=index)
    return out


def compare(source: Mapping[str, Mapping[str, Summary]], destination: Mapping[str, Mapping[str, Summary]]) -> list[Difference]:
    """Every (user, kind) whose count or digest differs, users and kinds in order."""
    empty = Summary(0, f"{0:064x}")
    out = []
    for user in sorted(set(source) | set(destination)):
        a, b = source.get(user, {}), destination.get(user, {})
        for kind in (*KINDS, PROFILE, DELETION, langgraph.KIND):
            if kind in a or kind in b:
                x, y = a.get(kind, empty), b.get(kind, empty)
                if x != y:
                    out.append(Difference(user, kind, x, y))
    return out
