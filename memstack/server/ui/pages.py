"""The dashboard's pages (GET, reading only), each over the library calls the REST API makes:
``views`` for users, counts, audit and usage, ``Memory`` for threads, history and contexts, the
RecordStore for the memories and their history."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ... import expiry, views
from ...ceiling import report
from ...errors import InvalidInput, MemstackError
from ...layers.names import SELF_KEY
from ...memory import Memory
from ...presets import PRESETS
from ...saved import KEY_PREFIX, saved_units
from ...stores import records_of
from ...types import MAX_LAST, RECORD_KINDS, Scope
from ..deps import require_thread, require_user
from ..errors import ApiError, status_of
from . import charts, session
from .render import day, page, url

USERS_PER_PAGE = 50
#: a thread page shows its last messages; ``all=1`` shows every one
MESSAGES_SHOWN = 200


def handled(fn: Callable[..., Response]) -> Callable[[Request], Response]:
    """The tenant for the page, and every refusal or library error as a page of its own."""

    def run(request: Request) -> Response:
        try:
            tenant = session.tenant_of(request)
            return fn(request, tenant, request.app.state.memory)
        except session.Refused as exc:
            return refused(request, exc)
        except (MemstackError, ApiError) as exc:
            return failed(request, exc)

    run.__name__, run.__doc__ = fn.__name__, fn.__doc__  # not functools.wraps: FastAPI would read fn's parameters
    return run


def refused(request: Request, exc: session.Refused) -> Response:
    if exc.login:
        return session.remember(request, RedirectResponse("/ui/login", status_code=303))
    return page(request, "error.html", tenant=None, status=403, message_key=f"refused_{exc.reason}", message=None)


def failed(request: Request, exc: MemstackError | ApiError, tenant: str | None = None) -> Response:
    status = exc.status if isinstance(exc, ApiError) else status_of(exc)
    return page(request, "error.html", tenant=tenant, status=status, message_key=None, message=str(exc))


def _arg(request: Request, name: str, *, required: bool = True) -> str | None:
    value = request.query_params.get(name)
    if required and not value:
        raise InvalidInput(f"{name} is required", field=name)
    return value


def _int(request: Request, name: str, default: int | None, *, low: int = 1, high: int = 1_000_000) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number", field=name) from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be from {low} to {high}", field=name)
    return value


def _user(request: Request, tenant: str, memory: Memory) -> Scope:
    user_id = _arg(request, "u")
    scope = memory.scope(user_id, tenant=tenant)  # type: ignore[arg-type]
    require_user(memory, tenant, scope.user_id)
    return scope


@handled
def users(request: Request, tenant: str, memory: Memory) -> Response:
    q = (request.query_params.get("q") or "").strip()
    number = _int(request, "page", 1) or 1
    found, total = views.users(memory.store, tenant, query=q or None, limit=USERS_PER_PAGE, offset=(number - 1) * USERS_PER_PAGE)
    pages = max(1, math.ceil(total / USERS_PER_PAGE))
    spend = report(memory.ceiling, tenant)  # the tenant's budget: spend vs each limit, why jobs wait
    return page(request, "users.html", tenant=tenant, users=found, total=total, q=q, number=number, pages=pages, spend=spend)


@handled
def user(request: Request, tenant: str, memory: Memory) -> Response:
    scope = memory.scope(_arg(request, "u"), tenant=tenant)  # type: ignore[arg-type]
    store = memory.store
    threads = memory.threads(user_id=scope.user_id, tenant=tenant)
    if not threads:
        require_user(memory, tenant, scope.user_id)
    records = getattr(store, "records", None)
    entities = records.current(scope, "entity") if records is not None else []
    state = records.current(scope, "state") if records is not None else []
    notes = []
    if records is not None:
        for info in threads:
            for r in records.current(replace(scope, thread_id=info.thread_id, agent_id=info.agent_id), "summary"):
                notes.append({"thread": info.thread_id, "items": list(r.value.get("items", []))})
    relations = len(records.current(scope, "relation")) if records is not None else 0
    saved = [saved_row(unit) for unit in saved_units(store, scope)]
    profile = next((e for e in entities if e.key == SELF_KEY), None)
    others = sorted((e for e in entities if e.key != SELF_KEY), key=lambda e: -(e.valid_from or e.created_at).timestamp())
    counts = views.overview(store, scope, threads=threads)
    return page(
        request,
        "user.html",
        tenant=tenant,
        u=scope.user_id,
        nav="overview",
        counts=counts,
        threads=threads,
        profile=profile,
        entities=[entity_row(e) for e in others],
        attributes=views.attributes,
        state=state,
        notes=notes,
        relations=relations,
        saved=saved,
        has_records=records is not None,
    )


def saved_row(unit: Any) -> dict[str, Any]:
    """A saved memory (the tools' note or key/value memory) as a row of the user page."""
    return {"id": unit.id, "text": unit.text, "category": unit.category or "", "at": unit.timestamp, "key": unit.id.startswith(KEY_PREFIX)}


def entity_row(record: Any) -> dict[str, Any]:
    """An entity as one row of the user page: its attributes' current values (with the day of the
    newest) and past ones, as text (a page of hundreds of entities renders in a few ms)."""
    attrs = []
    for a in views.attributes(record):
        since = max((day(c.get("valid_from")) for c in a["current"]), default="")
        attrs.append(
            {
                "name": a["name"],
                "current": "、".join(str(c["value"]) for c in a["current"]),
                "since": since,
                "past": "、".join(str(p["value"]) for p in a["past"]),
            }
        )
    return {
        "key": record.key,
        "name": record.value.get("name") or record.key,
        "type": record.value.get("type") or "",
        "attrs": attrs,
        "day": day(record.valid_from),
    }


@handled
def thread(request: Request, tenant: str, memory: Memory) -> Response:
    scope = memory.scope(_arg(request, "u"), _arg(request, "t"), tenant=tenant)  # type: ignore[arg-type]
    require_thread(memory, tenant, scope.user_id, scope.thread_id)  # type: ignore[arg-type]
    info = next(t for t in memory.threads(user_id=scope.user_id, tenant=tenant) if t.thread_id == scope.thread_id)
    show_all = request.query_params.get("all") == "1"
    messages = memory.history(
        user_id=scope.user_id, thread_id=scope.thread_id, tenant=tenant, last=None if show_all else min(MESSAGES_SHOWN, MAX_LAST)
    )  # type: ignore[arg-type]
    records = getattr(memory.store, "records", None)
    summary = records.current(scope, "summary", ["summary"]) if records is not None else []
    items = list(summary[0].value.get("items", [])) if summary else []
    return page(
        request,
        "thread.html",
        tenant=tenant,
        u=scope.user_id,
        tid=scope.thread_id,
        nav="overview",
        info=info,
        messages=messages,
        show_all=show_all,
        notes=items,
    )


@handled
def entity(request: Request, tenant: str, memory: Memory) -> Response:
    scope = _user(request, tenant, memory)
    key = _arg(request, "k")
    records = records_of(memory.store)
    found = records.current(scope, "entity", [key])  # type: ignore[list-item]
    if not found:
        raise ApiError(404, "record_not_found", f"no current entity {key!r}", field="k")
    record = found[0]
    versions = list(reversed(records.history(scope, "entity", record.key)))
    linked = [r for r in records.current(scope, "relation") if record.key in (r.value.get("source_key"), r.value.get("target_key"))]
    return page(
        request,
        "entity.html",
        tenant=tenant,
        u=scope.user_id,
        nav="overview",
        record=record,
        attributes=views.attributes(record),
        versions=versions,
        linked=linked,
    )


@handled
def graph(request: Request, tenant: str, memory: Memory) -> Response:
    scope = _user(request, tenant, memory)
    records = records_of(memory.store)
    relations = records.current(scope, "relation")
    names = {e.key: e.value.get("name") or e.key for e in records.current(scope, "entity")}
    data = graph_data(relations, names)
    return page(request, "graph.html", tenant=tenant, u=scope.user_id, nav="graph", relations=relations, data=data)


def graph_data(relations: list[Any], names: dict[str, str]) -> dict[str, Any]:
    """Nodes (entities named by some relation) and edges for the graph script, as plain JSON."""
    nodes: dict[str, dict[str, Any]] = {}
    edges = []
    for r in relations:
        v = r.value
        ends = []
        for end in ("source", "target"):
            key = v.get(f"{end}_key") or str(v.get(end, ""))
            node = nodes.setdefault(key, {"id": key, "label": names.get(key) or v.get(end) or key, "degree": 0})
            node["degree"] += 1
            ends.append(key)
        edges.append(
            {
                "source": ends[0],
                "target": ends[1],
                "label": v.get("relation", ""),
                "evidence": v.get("evidence", ""),
                "date": (r.valid_from.isoformat()[:10] if r.valid_from else ""),
                "alias": bool(v.get("alias")),
                "past": bool(v.get("invalid_at")),
                "confidence": v.get("confidence"),
            }
        )
    return {"nodes": list(nodes.values()), "edges": edges}


@handled
def context(request: Request, tenant: str, memory: Memory) -> Response:
    scope = _user(request, tenant, memory)
    threads = memory.threads(user_id=scope.user_id, tenant=tenant)
    form = {
        "t": request.query_params.get("t") or (threads[0].thread_id if threads else ""),
        "q": request.query_params.get("q", ""),
        "preset": request.query_params.get("preset", ""),
        "strategy": request.query_params.get("strategy", ""),
        "max_tokens": request.query_params.get("max_tokens", "") or (str(memory.max_tokens) if memory.max_tokens else ""),
    }
    built = error = None
    if "build" in request.query_params:
        try:
            built = build_context(memory, scope, form, _int(request, "max_tokens", None, low=0, high=2_000_000))
        except MemstackError as exc:
            error = str(exc)
    return page(
        request,
        "context.html",
        tenant=tenant,
        u=scope.user_id,
        nav="context",
        threads=threads,
        form=form,
        presets=list(PRESETS),
        built=built,
        error=error,
        stack=",".join(memory.layers),
    )


def build_context(memory: Memory, scope: Scope, form: dict[str, str], max_tokens: int | None) -> dict[str, Any]:
    """``Memory.context`` for the form (as ``POST .../context`` builds it), with its report as parts."""
    if not form["t"]:
        raise InvalidInput("choose a thread", field="t")
    options: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
    ctx = memory.context(
        user_id=scope.user_id,
        thread_id=form["t"],
        tenant=scope.tenant,
        query=form["q"] or None,
        preset=form["preset"] or None,
        strategy=form["strategy"].strip() or None,
        **options,
    )
    sections = dict(ctx.sections)
    memory_parts = [(name, tokens) for name, tokens in sections.items() if name.startswith("memory:")]
    parts = [
        ("system", sections.get("system", 0)),
        *memory_parts,
        ("history", sections.get("history", 0)),
        ("query", sections.get("query", 0)),
    ]
    return {"ctx": ctx, "bar": charts.token_bar(parts), "parts": parts}


@handled
def audit(request: Request, tenant: str, memory: Memory) -> Response:
    scope = _user(request, tenant, memory)
    kind = request.query_params.get("kind") or None
    if kind is not None and kind not in AUDIT_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(AUDIT_KINDS)}", field="kind")
    limit = _int(request, "limit", 200, high=10_000)
    events = (
        []
        if kind == FORGOTTEN
        else [{**e, "label": e["key"].replace("\x1f", " → ")} for e in views.audit(memory.store, scope, kind=kind, limit=limit)]
    )
    if kind in (None, FORGOTTEN):  # the user's forgotten threads and saved memories (and an earlier forgetting of the user)
        events = sorted(
            [*events, *forgotten_events(memory, tenant, scope.user_id, limit)], key=lambda e: datetime.fromisoformat(e["at"]), reverse=True
        )[:limit]
    return page(
        request,
        "audit.html",
        tenant=tenant,
        u=scope.user_id,
        nav="audit",
        days=by_day(events),
        kind=kind or "",
        kinds=AUDIT_KINDS,
        count=len(events),
    )


#: the audit page's filter: the record kinds, and the deletions' notes
FORGOTTEN = "forgotten"
AUDIT_KINDS = (*RECORD_KINDS, FORGOTTEN)


def forgotten_events(memory: Memory, tenant: str, user_id: str | None, limit: int | None) -> list[dict[str, Any]]:
    """Deletion notes (``views.deletions``) as events of an audit timeline: action "forget", the
    kind forgotten (user, thread, note), the layer that forgot, the rows by what they were."""
    return [
        {
            **d,
            "action": "forget",
            "thread_id": None,
            "before": None,
            "after": None,
            "label": None,
            "counted": [(what, n) for what, n in d["counts"].items()],
        }
        for d in views.deletions(memory.store, tenant, user_id=user_id, limit=limit)
    ]


def by_day(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    days: list[dict[str, Any]] = []
    for e in events:
        if not days or days[-1]["day"] != e["at"][:10]:
            days.append({"day": e["at"][:10], "events": []})
        days[-1]["events"].append(e)
    return days


@handled
def forgotten(request: Request, tenant: str, memory: Memory) -> Response:
    """The tenant's deletion log: every forgotten user, thread and saved memory, newest first."""
    limit = _int(request, "limit", 200, high=10_000)
    events = forgotten_events(memory, tenant, None, limit)
    policy, last = expiry.policy_of(memory.store, tenant), expiry.last_run(memory.store, tenant)
    kept = None if policy.keeps_everything else policy.describe()
    return page(
        request, "forgotten.html", tenant=tenant, days=by_day(events), count=len(events), retention=kept, last_pass=last and last.describe()
    )


@handled
def usage(request: Request, tenant: str, memory: Memory) -> Response:
    scope = _user(request, tenant, memory)
    data = views.usage(memory.store, scope)
    per_day = views.usage_by_day(memory.store, scope)
    return page(
        request,
        "usage.html",
        tenant=tenant,
        u=scope.user_id,
        nav="usage",
        totals=data["totals"],
        calls=data["calls"][-100:][::-1],
        per_day=per_day,
        chart=charts.day_bars(per_day),
    )


def login_form(request: Request) -> Response:
    if not request.app.state.auth.keys:
        return RedirectResponse(url("users"), status_code=303)
    return page(request, "login.html", tenant=None, bad=False)


def login_failed(request: Request) -> HTMLResponse:
    return page(request, "login.html", tenant=None, bad=True, status=401)
