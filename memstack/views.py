"""Read-only views of a user's model-made memory as plain JSON data (for the CLI, the REST API and
the dashboard): the tenant's users with their counts, entities (attributes current and past),
relations, state, the audit trail and model usage (totals and per day), plus their text rendering."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timezone
from typing import Any

from .errors import InvalidInput, UsageError
from .saved import NOTES_THREAD, saved_units
from .stores import Store, records_of, usage_of
from .types import Record, Scope, ThreadInfo


def _record(r: Record) -> dict[str, Any]:
    return {
        "key": r.key,
        "value": dict(r.value),
        "source_ids": list(r.source_ids),
        "valid_from": r.valid_from.isoformat() if r.valid_from else None,
        "version": r.version,
    }


def known_user(store: Store, scope: Scope) -> bool:
    """Whether the tenant has this user: a message in some thread, model-made memory of them, or
    a saved memory (the tools'). What the REST API's 404 means, so that the CLI gives the same
    answer for an unknown user."""
    user = Scope(user_id=scope.user_id, tenant=scope.tenant)
    if store.history.threads(user):
        return True
    if getattr(store, "records", None) is not None and any(
        records_of(store).current(user, kind) for kind in ("entity", "relation", "state")
    ):
        return True
    return next(saved_units(store, user), None) is not None  # without threads the user's units are few


def user_ids(store: Store, tenant: str) -> list[str]:
    """The ids of the tenant's users, sorted: those ``known_user`` knows (messages, model-made
    memory of them, saved memories), also where they have no message."""
    talked = store.history.users(tenant)
    others: set[str] = set()
    if getattr(store, "records", None) is not None:
        others.update(records_of(store).users(tenant))
    if getattr(store, "units", None) is not None:
        others.update(store.units.users(tenant, thread_id=NOTES_THREAD))  # type: ignore[attr-defined]
    others -= set(talked)
    known = [u for u in sorted(others) if known_user(store, Scope(user_id=u, tenant=tenant))]  # a thread summary alone is no user
    return sorted([*talked, *known])


def users(store: Store, tenant: str, *, query: str | None = None, limit: int = 50, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """A page of the tenant's users (``user_ids``: with messages, model-made memory or saved
    memories; ids containing ``query``, case-folded; sorted by id), each with its counts
    (``overview``), and how many users match in all."""
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or limit < 1
        or isinstance(offset, bool)
        or not isinstance(offset, int)
        or offset < 0
    ):
        raise InvalidInput("limit must be >= 1 and offset >= 0", field="limit")
    needle = (query or "").strip().casefold()
    ids = [u for u in user_ids(store, tenant) if needle in u.casefold()]
    return [overview(store, Scope(user_id=u, tenant=tenant)) for u in ids[offset : offset + limit]], len(ids)


def overview(store: Store, scope: Scope, *, threads: list[ThreadInfo] | None = None) -> dict[str, Any]:
    """One user's counts: threads, messages, current memories (entities, relations, state keys and
    the notes of the threads' summaries), saved memories (the tools'), write-side jobs waiting, model tokens spent (prompt +
    completion), and the time of the last message (None without any). Backends that keep no
    model-made memory (jsonl) count none. ``threads``: the user's, when the caller has them."""
    user = scope.user()
    threads = store.history.threads(user) if threads is None else threads
    records = getattr(store, "records", None)
    memories = tokens = 0
    if records is not None:
        memories = sum(len(records.current(user, kind)) for kind in ("entity", "relation", "state"))
        memories += sum(len(r.value.get("items", [])) for t in threads for r in records.current(_thread_scope(user, t), "summary"))
    if getattr(store, "usage", None) is not None:
        tokens = sum(u.prompt_tokens + u.completion_tokens for u in usage_of(store).read(user))
    saved = sum(1 for _ in saved_units(store, user))
    return {
        "user_id": user.user_id,
        "threads": len(threads),
        "messages": sum(t.messages for t in threads),
        "memories": memories,
        "saved": saved,
        "jobs_waiting": store.jobs.pending(user),
        "model_tokens": tokens,
        "last_at": max((t.last_at for t in threads), default=None),
    }


def _thread_scope(user: Scope, info: ThreadInfo) -> Scope:
    return replace(user, thread_id=info.thread_id, agent_id=info.agent_id)


def attributes(entity: Record) -> list[dict[str, Any]]:
    """An entity's attributes, each with its current values and its superseded ones, with dates:
    ``[{"name", "current": [{"value", "valid_from", "source_ids"}], "past": [{..., "until"}]}]``."""
    from .layers.attributes import attribute_values

    out = []
    for name, attribute in entity.value.get("attributes", {}).items():
        current, past = attribute_values(attribute if isinstance(attribute, dict) else {"value": str(attribute)})
        out.append({"name": name, "current": [c for c in current if c.get("value")], "past": past})
    return out


def usage_by_day(store: Store, scope: Scope) -> list[dict[str, Any]]:
    """The user's model calls per UTC day, oldest first: calls, failed, prompt and completion tokens."""
    days: dict[str, dict[str, Any]] = {}
    for u in usage_of(store).read(scope.user()):
        d = days.setdefault(
            u.at.astimezone(timezone.utc).date().isoformat(), {"calls": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        d["calls"] += 1
        d["failed"] += 0 if u.ok else 1
        d["prompt_tokens"] += u.prompt_tokens
        d["completion_tokens"] += u.completion_tokens
    return [{"day": day, **d} for day, d in sorted(days.items())]


def entities(store: Store, scope: Scope) -> list[dict[str, Any]]:
    return [_record(r) for r in records_of(store).current(scope.user(), "entity")]


def graph(store: Store, scope: Scope) -> list[dict[str, Any]]:
    return [_record(r) for r in records_of(store).current(scope.user(), "relation")]


def state(store: Store, scope: Scope) -> dict[str, Any]:
    from .layers.state import current_state

    return current_state(store, scope)


def audit(store: Store, scope: Scope, *, kind: str | None = None, limit: int | None = 100) -> list[dict[str, Any]]:
    return [
        {
            "at": e.at.isoformat(),
            "layer": e.layer,
            "kind": e.kind,
            "key": e.key,
            "action": e.action,
            "thread_id": e.scope.thread_id,
            "before": dict(e.before) if e.before is not None else None,
            "after": dict(e.after) if e.after is not None else None,
            "source_ids": list(e.source_ids),
        }
        for e in records_of(store).audit(scope.user(), kind=kind, limit=limit)
    ]


def deletions(store: Store, tenant: str, *, user_id: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The tenant's deletion notes (``Store.deletions``; with ``user_id`` that user's own: its
    forgotten threads and saved memories, and the user if it was forgotten before), newest first:
    ``{"at", "kind" (user, thread, note), "layer", "rows", "counts", "user_hash", "target_hash"}``.
    They hold no content and no id: what was forgotten stays forgotten."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInput("limit must be >= 1", field="limit")
    notes = store.deletions(tenant, user_id=user_id)[::-1][:limit]
    return [
        {
            "at": d.at.isoformat(),
            "kind": d.kind,
            "layer": d.layer,
            "rows": d.rows,
            "counts": dict(d.counts),
            "user_hash": d.user_hash,
            "target_hash": d.target_hash,
        }
        for d in notes
    ]


def usage(store: Store, scope: Scope) -> dict[str, Any]:
    """Totals per layer and model, and every call."""
    rows = usage_of(store).read(scope.user())
    totals: dict[str, dict[str, Any]] = {}
    for u in rows:
        t = totals.setdefault(f"{u.layer} {u.model}", {"calls": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0})
        t["calls"] += 1
        t["failed"] += 0 if u.ok else 1
        t["prompt_tokens"] += u.prompt_tokens
        t["completion_tokens"] += u.completion_tokens
        t["seconds"] = round(t["seconds"] + u.latency_ms / 1000, 3)
    calls = [
        {
            "at": u.at.isoformat(),
            "thread_id": u.scope.thread_id,
            "layer": u.layer,
            "model": u.model,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "latency_ms": round(u.latency_ms, 1),
            "ok": u.ok,
            "error": u.error,
        }
        for u in rows
    ]
    return {"totals": totals, "calls": calls}


def _audit_line(e: dict[str, Any]) -> str:
    """One audit event; a rejected statement shows what the model said and why it was not kept."""
    what = e["key"]
    if e["kind"] == "rejected" and e.get("after"):
        what = f"{e['after'].get('statement', '')}  -- {e['after'].get('reason', '')}"
    return f"{e['at']}  {e['action']:<9} {e['kind']:<8} {what}  ({e['layer']})"


VIEWS: dict[str, Callable[..., Any]] = {"entities": entities, "graph": graph, "state": state, "audit": audit, "usage": usage}


def render(what: str, data: Any) -> str:
    """Human-readable text of a view's data."""
    if what == "entities":
        return "\n".join(_entity_line(e) for e in data) or "(no entities)"
    if what == "graph":
        return (
            "\n".join(
                f'{r["value"]["source"]} —{r["value"]["relation"]}→ {r["value"]["target"]}  "{r["value"].get("evidence", "")}" ({(r["valid_from"] or "")[:10]}, {r["value"].get("confidence")})'
                for r in data
            )
            or "(no relations)"
        )
    if what == "state":
        return "\n".join(f"{k}: {v}" for k, v in data.items()) or "(no state)"
    if what == "audit":
        return "\n".join(_audit_line(e) for e in data) or "(no audit events)"
    if what == "usage":
        lines = [
            f"{name}: {plural(t['calls'], 'call')} ({t['failed']} failed), {t['prompt_tokens']} prompt + {plural(t['completion_tokens'], 'completion token')}, {t['seconds']} s"
            for name, t in data["totals"].items()
        ]
        return "\n".join(lines) or "(no model calls)"
    raise UsageError(f"unknown view {what!r}")


def _entity_line(e: dict[str, Any]) -> str:
    """``name [type] aka ...: description | attributes``, leaving out the parts an entity lacks
    (the model often gives attributes and no description)."""
    v = e["value"]
    attrs = "; ".join(f"{k}={a['value']}" for k, a in v.get("attributes", {}).items())
    aliases = f" aka {', '.join(v['aliases'])}" if v.get("aliases") else ""
    details = " | ".join(part for part in ((v.get("description") or "").strip(), attrs) if part)
    return f"{v.get('name', e['key'])} [{v.get('type') or '?'}]{aliases}" + (f": {details}" if details else "")


def plural(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``: the counts in command output agree with their noun."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
