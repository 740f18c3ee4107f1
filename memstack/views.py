"""Read-only views of a user's model-made memory as plain JSON data (for the CLI, and later HTTP):
entities, relations, state, the audit trail and model usage, plus their text rendering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import UsageError
from .saved import saved_units
from .stores import Store, records_of, usage_of
from .types import Record, Scope


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
    if getattr(store, "records", None) is not None and any(records_of(store).current(user, kind) for kind in ("entity", "relation", "state")):
        return True
    return next(saved_units(store, user), None) is not None  # without threads the user's units are few


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
    calls = [{"at": u.at.isoformat(), "thread_id": u.scope.thread_id, "layer": u.layer, "model": u.model, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "latency_ms": round(u.latency_ms, 1), "ok": u.ok, "error": u.error} for u in rows]
    return {"totals": totals, "calls": calls}


VIEWS: dict[str, Callable[..., Any]] = {"entities": entities, "graph": graph, "state": state, "audit": audit, "usage": usage}


def render(what: str, data: Any) -> str:
    """Human-readable text of a view's data."""
    if what == "entities":
        return "\n".join(_entity_line(e) for e in data) or "(no entities)"
    if what == "graph":
        return "\n".join(f"{r['value']['source']} —{r['value']['relation']}→ {r['value']['target']}  \"{r['value'].get('evidence', '')}\" ({(r['valid_from'] or '')[:10]}, {r['value'].get('confidence')})" for r in data) or "(no relations)"
    if what == "state":
        return "\n".join(f"{k}: {v}" for k, v in data.items()) or "(no state)"
    if what == "audit":
        return "\n".join(f"{e['at']}  {e['action']:<9} {e['kind']:<8} {e['key']}  ({e['layer']})" for e in data) or "(no audit events)"
    if what == "usage":
        lines = [f"{name}: {plural(t['calls'], 'call')} ({t['failed']} failed), {t['prompt_tokens']} prompt + {plural(t['completion_tokens'], 'completion token')}, {t['seconds']} s" for name, t in data["totals"].items()]
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
