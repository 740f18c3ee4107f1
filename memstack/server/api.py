"""The REST API: one user's messages, threads, context, search and model-made memory, thin over AsyncMemory.

Every route is under ``/v1/users/{user_id}`` and scoped to the caller's tenant. Routes that read or
delete what a user has answer 404 when the tenant has no such user (another tenant's user with the
same id included); adding, importing, putting state, building a context and searching work for a
user the tenant has not seen yet (a new user has no memories: the answers are empty).

Every route is ``async`` and awaits the app's AsyncMemory (``memstack.aio``): the history's calls
on native async I/O where the backend has it, the rest (contexts, searches, the records' views)
in its bounded executor, so the event loop keeps serving while the store works.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query, Response
from pydantic import AwareDatetime

from .. import edits, expiry, views
from ..aio import AsyncMemory
from ..errors import InvalidInput, NotFound
from ..layers.state import current_state
from ..stores import RecordStore, Store, records_of
from ..types import MAX_ID_LENGTH, MAX_LAST, Change, Record, Scope, SearchFilter, in_range, utcnow
from . import idempotency
from .deps import AsyncMem, Tenant, ThreadId, UserId, thread_or_404, user_or_404
from .errors import ApiError
from .schemas import (
    AddMessages,
    AttributeValue,
    AuditOut,
    ContextOut,
    ContextRequest,
    Deleted,
    DeletionOut,
    Export,
    HitOut,
    Import,
    Imported,
    JobsRun,
    MessageOut,
    NoteEdit,
    Pending,
    RecordKind,
    RecordOut,
    RetentionOut,
    SavedOut,
    SearchRequest,
    StateValue,
    Stored,
    ThreadOut,
    UsageOut,
    error_responses,
    link,
)

router = APIRouter(prefix="/v1/users/{user_id}", tags=["memory"], responses=error_responses(400, 401, 404, 413, 422, 503))

#: the layer name that edits made through the API carry in the audit trail
EDITOR = "api"

# OpenAPI links: what a response makes possible next (the user and thread it names now exist)
_U = "/v1/users/{user_id}"
_USER = {"user_id": "$request.path.user_id"}
_THREAD = {**_USER, "thread_id": "$request.path.thread_id"}
AFTER_ADD = {
    "ReadHistory": link("GET", f"{_U}/threads/{{thread_id}}/messages", "the thread's messages, these included", **_THREAD),
    "ListThreads": link("GET", f"{_U}/threads", "the user's threads, this one included", **_USER),
    "BuildContext": link("POST", f"{_U}/threads/{{thread_id}}/context", "the thread's next context", **_THREAD),
    "Search": link("POST", f"{_U}/search", "search the user's memories", **_USER),
    "Export": link("GET", f"{_U}/export", "every message of the user", **_USER),
    "ReadAudit": link("GET", f"{_U}/audit", "the user's audit trail", **_USER),
    "ReadUsage": link("GET", f"{_U}/usage", "the user's model calls", **_USER),
    "SetState": link("PUT", f"{_U}/state/{{key}}", "set a key of the user's state", **_USER),
    "DeleteThread": link("DELETE", f"{_U}/threads/{{thread_id}}", "delete the thread", **_THREAD),
    "DeleteUser": link("DELETE", _U, "delete the user", **_USER),
}
AFTER_PUT_STATE = {
    "ReadStateKey": link("GET", f"{_U}/state/{{key}}", "the key just set", **_USER, key="$request.path.key"),
    "ReadState": link("GET", f"{_U}/state", "the user's whole state", **_USER),
    "ListState": link("GET", f"{_U}/memories/{{kind}}", "the user's state records", **_USER, kind="state"),
    "DeleteStateKey": link("DELETE", f"{_U}/memories/{{kind}}/{{key}}", "delete the key", **_USER, kind="state", key="$request.path.key"),
    "ReadAudit": link("GET", f"{_U}/audit", "the user's audit trail, this edit first", **_USER),
}
AFTER_EXPORT = {
    "ImportBack": link(
        "POST",
        f"{_U}/import",
        "import the export into the same user (adds nothing: the ids are kept)",
        request_body="$response.body",
        **_USER,
    )
}


@router.get("/threads", summary="List a user's threads, most recent activity first")
async def list_threads(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> list[ThreadOut]:
    await user_or_404(memory, tenant, user_id)
    return [ThreadOut.of(t) for t in await memory.threads(user_id=user_id, tenant=tenant)]


@router.post(
    "/threads/{thread_id}/messages",
    status_code=201,
    summary="Store messages; the layers' work is queued",
    responses={201: {"links": AFTER_ADD}},
)
async def add_messages(
    user_id: UserId,
    thread_id: ThreadId,
    body: AddMessages,
    tenant: Tenant,
    memory: AsyncMem,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=idempotency.HEADER, description="a retried request with the same key stores nothing and answers what the first one did"
        ),
    ] = None,
) -> Stored:
    key = idempotency.checked(idempotency_key)
    scope = memory.scope(user_id, thread_id, tenant=tenant)
    if key is not None and (first := await memory.run_sync(idempotency.recall, memory.memory, scope, key)) is not None:
        response.headers[idempotency.REPLAYED] = "true"
        return Stored.model_validate(first)
    messages = [m.to_dict() for m in body.messages]
    if key is not None:  # copies of this request at once store once (see idempotency)
        messages = idempotency.with_ids(messages, key)
    stored = await memory.add(messages, user_id=user_id, thread_id=thread_id, tenant=tenant, at=body.at)
    if key is not None and not stored:
        response.headers[idempotency.REPLAYED] = "true"
        return Stored(stored=[MessageOut.of(m) for m in await memory.run_sync(idempotency.stored_copies, memory.memory, scope, messages)])
    answer = Stored(stored=[MessageOut.of(m) for m in stored])
    if key is not None:
        await memory.run_sync(idempotency.remember, memory.memory, scope, key, answer.model_dump(mode="json"))
    return answer


@router.get("/threads/{thread_id}/messages", summary="A thread's messages in order")
async def read_history(
    user_id: UserId,
    thread_id: ThreadId,
    tenant: Tenant,
    memory: AsyncMem,
    last: Annotated[int | None, Query(ge=1, le=MAX_LAST, description="only the last n")] = None,
    at: Annotated[AwareDatetime | None, Query(description="only messages dated at or before this time")] = None,
    order: Annotated[
        Literal["time", "append"], Query(description="time: by date, ties as stored; append: as stored (the app's own order)")
    ] = "time",
    replaced: Annotated[
        Literal["exclude", "include"],
        Query(
            description="exclude: the thread as the client sees it, without the answers a regenerated one replaced; "
            "include: those too, each message naming the ones it replaces and the one that replaced it"
        ),
    ] = "exclude",
) -> list[MessageOut]:
    await thread_or_404(memory, tenant, user_id, thread_id)
    read = await memory.history(user_id=user_id, thread_id=thread_id, tenant=tenant, at=at, last=last, order=order, replaced=replaced)
    return MessageOut.linked(read) if replaced == "include" else [MessageOut.of(m) for m in read]


@router.delete("/threads/{thread_id}", summary="Delete a thread with everything keyed to it")
async def delete_thread(user_id: UserId, thread_id: ThreadId, tenant: Tenant, memory: AsyncMem) -> Deleted:
    await thread_or_404(memory, tenant, user_id, thread_id)
    return Deleted(deleted=await memory.forget(user_id=user_id, thread_id=thread_id, tenant=tenant, by=EDITOR))


@router.post("/threads/{thread_id}/context", summary="Build the context for the next model call")
async def build_context(
    user_id: UserId, thread_id: ThreadId, body: ContextRequest, tenant: Tenant, memory: AsyncMem, response: Response
) -> ContextOut:
    budget = {"max_tokens": body.max_tokens} if "max_tokens" in body.model_fields_set else {}
    ctx = await memory.context(
        user_id=user_id,
        thread_id=thread_id,
        tenant=tenant,
        query=body.query,
        at=body.at,
        strategy=body.strategy,
        preset=body.preset,
        counter=body.counter,
        **budget,
        **body.options(),
    )
    await _pending(response, memory, user_id, tenant)
    return ContextOut.of(ctx)


#: the header that says how many of the user's write-side jobs have not run yet (new messages
#: not yet indexed or extracted: a context or search may miss them)
PENDING_HEADER = "X-Memstack-Pending-Jobs"


async def _pending(response: Response, memory: AsyncMemory, user_id: str, tenant: str) -> None:
    response.headers[PENDING_HEADER] = str(await memory.pending(user_id=user_id, tenant=tenant))


@router.post("/search", summary="The user's memories most relevant to a query, across threads")
async def search(user_id: UserId, body: SearchRequest, tenant: Tenant, memory: AsyncMem, response: Response) -> list[HitOut]:
    where = SearchFilter(thread_ids=tuple(body.thread_ids)) if body.thread_ids else None
    hits = await memory.search(body.query, user_id=user_id, tenant=tenant, k=body.k, at=body.at, where=where)
    await _pending(response, memory, user_id, tenant)
    return [HitOut.of(h) for h in hits]


@router.get("/memories/{kind}", summary="The current model-made records of a kind")
async def list_memories(
    user_id: UserId,
    kind: RecordKind,
    tenant: Tenant,
    memory: AsyncMem,
    thread_id: Annotated[str | None, Query(description="the thread (required for summaries)")] = None,
) -> list[RecordOut]:
    await user_or_404(memory, tenant, user_id)
    return [RecordOut.of(r) for r in await memory.memories(kind, user_id=user_id, thread_id=_thread_for(kind, thread_id), tenant=tenant)]


@router.delete("/memories/{kind}/{key}", summary="Delete a record (audited; its history is kept)")
async def delete_memory(
    user_id: UserId, kind: RecordKind, key: str, tenant: Tenant, memory: AsyncMem, thread_id: Annotated[str | None, Query()] = None
) -> Deleted:
    await user_or_404(memory, tenant, user_id)
    scope = memory.scope(user_id, _thread_for(kind, thread_id), tenant=tenant)
    if not await memory.run_sync(_records(memory.store).apply, scope, [Change("delete", kind, key, at=utcnow())], layer=EDITOR):
        raise ApiError(404, "record_not_found", f"no current {kind} {key!r}", field="key")
    return Deleted(deleted=1)


@router.put(
    "/memories/entity/{key}/attributes/{attribute}",
    summary="Set an entity's attribute to one current value (audited; the values it replaces become past ones)",
)
async def set_attribute(user_id: UserId, key: str, attribute: str, body: AttributeValue, tenant: Tenant, memory: AsyncMem) -> RecordOut:
    await user_or_404(memory, tenant, user_id)
    return RecordOut.of(
        await _edit(
            memory, edits.set_attribute, memory.store, memory.scope(user_id, tenant=tenant), key, attribute, body.value, editor=EDITOR
        )
    )


@router.delete(
    "/memories/entity/{key}/attributes/{attribute}",
    summary="Remove an entity's attribute (audited; its values stay in the record's history); answers the entity",
)
async def delete_attribute(user_id: UserId, key: str, attribute: str, tenant: Tenant, memory: AsyncMem) -> RecordOut:
    await user_or_404(memory, tenant, user_id)
    return RecordOut.of(
        await _edit(memory, edits.delete_attribute, memory.store, memory.scope(user_id, tenant=tenant), key, attribute, editor=EDITOR)
    )


NoteIndex = Annotated[
    int,
    Path(
        ge=0,
        le=100_000,
        description="the note's place in the thread's summary, from 0, as GET .../memories/summary?thread_id= lists its items",
    ),
]


@router.put(
    "/threads/{thread_id}/summary/notes/{index}",
    summary="Rewrite one note of the thread's summary (audited; 409 if the summary changed since it was read)",
    responses=error_responses(409),
)
async def edit_note(user_id: UserId, thread_id: ThreadId, index: NoteIndex, body: NoteEdit, tenant: Tenant, memory: AsyncMem) -> RecordOut:
    await thread_or_404(memory, tenant, user_id, thread_id)
    scope = memory.scope(user_id, thread_id, tenant=tenant)
    return RecordOut.of(await _edit(memory, edits.edit_note, memory.store, scope, index, body.text, expect=body.expect, editor=EDITOR))


@router.delete(
    "/threads/{thread_id}/summary/notes/{index}",
    summary="Remove one note of the thread's summary (audited; 409 if the summary changed since it was read); answers the summary",
    responses=error_responses(409),
)
async def delete_note(
    user_id: UserId,
    thread_id: ThreadId,
    index: NoteIndex,
    tenant: Tenant,
    memory: AsyncMem,
    expect: Annotated[str, Query(description="the note's text as it was read")],
) -> RecordOut:
    await thread_or_404(memory, tenant, user_id, thread_id)
    scope = memory.scope(user_id, thread_id, tenant=tenant)
    return RecordOut.of(await _edit(memory, edits.delete_note, memory.store, scope, index, expect=expect, editor=EDITOR))


async def _edit(memory: AsyncMemory, fn: Any, *args: Any, **kwargs: Any) -> Record:
    """A correction through ``memstack.edits`` (as the dashboard makes it), in the executor; what
    it names and is not there is the API's 404 ``record_not_found``."""
    try:
        return await memory.run_sync(fn, *args, **kwargs)
    except NotFound as exc:
        raise ApiError(404, "record_not_found", str(exc), field=exc.field) from None


@router.put(
    "/state/{key}",
    summary="Set a key of the user's JSON state (audited); answers the record, its value as sent",
    responses={200: {"links": AFTER_PUT_STATE}},
)
async def put_state(user_id: UserId, key: str, body: StateValue, tenant: Tenant, memory: AsyncMem) -> RecordOut:
    return RecordOut.of(await memory.run_sync(_put_state, memory.store, memory.scope(user_id, tenant=tenant), key, body.value))


def _put_state(store: Store, scope: Scope, key: str, value: Any) -> Record:
    records = _records(store)
    # stored as every writer of state stores it (layers.state.state_value); read back unwrapped
    records.apply(scope, [Change("put", "state", key, {"value": value}, at=utcnow())], layer=EDITOR)
    return records.current(scope, "state", [key])[0]


@router.get("/state", summary="The user's JSON state as one object, key -> value (what the get_state tool reads)")
async def read_state(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> dict[str, Any]:
    await user_or_404(memory, tenant, user_id)
    return await memory.run_sync(current_state, memory.store, memory.scope(user_id, tenant=tenant))


@router.get("/state/{key}", summary="One key of the user's JSON state: its record, the value itself")
async def read_state_key(user_id: UserId, key: str, tenant: Tenant, memory: AsyncMem) -> RecordOut:
    await user_or_404(memory, tenant, user_id)
    found = await memory.run_sync(_records(memory.store).current, memory.scope(user_id, tenant=tenant), "state", [key])
    if not found:
        raise ApiError(404, "record_not_found", f"no current state {key!r}", field="key")
    return RecordOut.of(found[0])


@router.get("/audit", summary="Every add, supersede and delete of the user's model-made memory, newest first")
async def read_audit(
    user_id: UserId, tenant: Tenant, memory: AsyncMem, kind: RecordKind | None = None, limit: Annotated[int, Query(ge=1, le=10_000)] = 100
) -> list[AuditOut]:
    await user_or_404(memory, tenant, user_id)
    return [
        AuditOut(**e)
        for e in await memory.run_sync(views.audit, memory.store, memory.scope(user_id, tenant=tenant), kind=kind, limit=limit)
    ]


@router.get("/usage", summary="The model calls made for the user: totals and every call")
async def read_usage(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> UsageOut:
    await user_or_404(memory, tenant, user_id)
    return UsageOut(**await memory.run_sync(views.usage, memory.store, memory.scope(user_id, tenant=tenant)))


@router.get("/export", summary="Every message of the user, thread by thread", responses={200: {"links": AFTER_EXPORT}})
async def export(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> Export:
    await user_or_404(memory, tenant, user_id)
    return Export(records=[r async for r in memory.export(user_id=user_id, tenant=tenant)])


@router.post("/import", summary="Store exported messages (dates and ids kept; importing twice adds nothing)")
async def import_messages(user_id: UserId, body: Import, tenant: Tenant, memory: AsyncMem) -> Imported:
    records = [{**r, "user_id": r.get("user_id", user_id)} for r in body.records]
    for i, r in enumerate(records):
        if r["user_id"] != user_id:
            raise InvalidInput(f"records[{i}] belongs to another user than {user_id!r}", field=f"records[{i}].user_id")
    return Imported(imported=await memory.import_(records, tenant=tenant), records=len(records))


@router.get("/pending", summary="How many of the user's write-side jobs have not run yet (what a context or search may miss)")
async def read_pending(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> Pending:
    return Pending(pending=await memory.pending(user_id=user_id, tenant=tenant))


#: how long a flush waits for the user's jobs that another worker is running (the service's own)
FLUSH_WAIT_SECONDS = 30.0


@router.post(
    "/flush",
    summary="Run the user's ready write-side jobs now, without waiting for batches to fill (Memory.flush), "
    "and wait for those another worker is running",
)
async def flush(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> JobsRun:
    """The service's worker may hold one of the user's jobs when the flush comes (leased, so this
    run skips it): the flush then waits for it, up to ``FLUSH_WAIT_SECONDS``, so that what the
    client reads next has the user's messages indexed and extracted. It never waits on a job that
    failed or that a cost ceiling put off (those are in the answer)."""
    ran, failed, waited = 0, 0, 0
    errors: list[str] = []
    deadline = asyncio.get_running_loop().time() + FLUSH_WAIT_SECONDS
    while True:
        report = await memory.flush(user_id=user_id, tenant=tenant)
        ran, failed, waited, errors = ran + report.ran, failed + report.failed, waited + report.waited, errors + list(report.errors)
        if failed or waited or asyncio.get_running_loop().time() >= deadline:
            break
        if not await memory.pending(user_id=user_id, tenant=tenant):
            break
        await asyncio.sleep(0.05)
    return JobsRun(ran=ran, failed=failed, waited=waited, errors=errors)


@router.delete("/saved/{memory_id}", summary="Delete one saved memory (a tool's note or key/value memory) by id; answers it")
async def forget_saved(user_id: UserId, memory_id: str, tenant: Tenant, memory: AsyncMem) -> SavedOut:
    unit = await memory.forget_saved(memory_id, user_id=user_id, tenant=tenant, by=EDITOR)
    return SavedOut(id=unit.id, text=unit.text, timestamp=unit.timestamp, category=unit.category, metadata=dict(unit.metadata))


@router.delete("", summary="Delete a user with everything they own, in every store")
async def delete_user(user_id: UserId, tenant: Tenant, memory: AsyncMem) -> Deleted:
    await user_or_404(memory, tenant, user_id)
    return Deleted(deleted=await memory.forget(user_id=user_id, tenant=tenant, by=EDITOR))


#: routes of the tenant as a whole (not under one user)
tenant_router = APIRouter(prefix="/v1", tags=["memory"], responses=error_responses(400, 401, 422, 503))


@tenant_router.get(
    "/deletions",
    summary="The deletion notes of the tenant (or of one user): what was forgotten, when and by whom, newest first; no content",
)
async def read_deletions(
    tenant: Tenant,
    memory: AsyncMem,
    user_id: Annotated[
        str | None, Query(max_length=MAX_ID_LENGTH, description="only this user's (also after the user was forgotten)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
) -> list[DeletionOut]:
    return [DeletionOut(**d) for d in await memory.run_sync(views.deletions, memory.store, tenant, user_id=user_id, limit=limit)]


@tenant_router.get("/retention", summary="How long the tenant's memory is kept, and what its last retention pass deleted")
async def read_retention(tenant: Tenant, memory: AsyncMem) -> RetentionOut:
    return RetentionOut(**await memory.run_sync(retention_view, memory.store, tenant))


def retention_view(store: Store, tenant: str) -> dict[str, Any]:
    """The tenant's retention policy and last pass as JSON-ready data (the REST answer, the dashboard's)."""
    policy, last = expiry.policy_of(store, tenant), expiry.last_run(store, tenant)
    run = None if last is None else {k: v for k, v in last.to_dict().items() if k != "tenant"}
    return {"tenant": tenant, "policy": policy.to_dict(), "keeps_everything": policy.keeps_everything, "last_run": run}


@tenant_router.get(
    "/usage",
    summary="The tenant's model calls and tokens per user (the layers' and the answers' apart), its budget, each limit's spend in "
    "its period, and why the layers' jobs wait (memstack usage --json gives the same)",
)
async def read_tenant_usage(
    tenant: Tenant,
    memory: AsyncMem,
    user_id: Annotated[str | None, Query(max_length=MAX_ID_LENGTH, description="only this user's calls and limits")] = None,
    since: Annotated[AwareDatetime | None, Query(description="only calls from then on (ISO 8601 with a UTC offset)")] = None,
) -> dict[str, Any]:
    from ..ceiling import report

    since = in_range(since, field_name="since") if since is not None else None
    return await memory.run_sync(report, memory.memory.ceiling, tenant, user_id=user_id, since=since)


def _thread_for(kind: str, thread_id: str | None) -> str | None:
    if kind == "summary" and thread_id is None:
        raise InvalidInput("summaries are kept per thread: give thread_id", field="thread_id")
    return thread_id


def _records(store: Store) -> RecordStore:
    return records_of(store)
