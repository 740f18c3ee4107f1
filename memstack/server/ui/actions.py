"""The dashboard's actions (POST, CSRF-checked): corrections through ``memstack.edits`` and
forgetting through ``Memory.forget``, as the REST API deletes; each answers a redirect to the page
it was made on (Post/Redirect/Get), or an error page that says why nothing changed."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from ... import edits
from ...errors import InvalidInput, MemstackError
from ...memory import Memory
from ...views import known_user
from ..deps import require_thread, require_user
from ..errors import ApiError
from . import pages, session
from .render import key_of, page, url

log = logging.getLogger("memstack.server.ui")

#: the layer name a dashboard edit carries in the audit trail
EDITOR = "ui"

Form = Mapping[str, str]


def _field(form: Form, name: str, *, blank: bool = False) -> str:
    value = form.get(name)
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise InvalidInput(f"{name} is required", field=name)
    return value


def _index(form: Form) -> int:
    try:
        return int(_field(form, "i"))
    except ValueError:
        raise InvalidInput("i must be a whole number", field="i") from None


def _value(form: Form) -> Any:
    """A state value: the text as typed, or (``as=json``) the JSON it holds."""
    text = _field(form, "value")
    if form.get("as") != "json":
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"not JSON: {exc}", field="value") from None


def state_set(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    edits.set_state(memory.store, scope, _field(form, "key"), _value(form), editor=EDITOR)
    return url("user", u=scope.user_id, done="saved") + "#state"


def state_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    edits.delete_record(memory.store, scope, "state", _field(form, "key"), editor=EDITOR)
    return url("user", u=scope.user_id, done="deleted") + "#state"


def attribute_set(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    record = edits.set_attribute(memory.store, scope, _field(form, "k"), _field(form, "attribute"), _field(form, "value"), editor=EDITOR)
    return url("entity", u=scope.user_id, k=record.key, done="saved")


def attribute_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    record = edits.delete_attribute(memory.store, scope, _field(form, "k"), _field(form, "attribute"), editor=EDITOR)
    return url("entity", u=scope.user_id, k=record.key, done="deleted")


def entity_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    edits.delete_record(memory.store, scope, "entity", _field(form, "k"), editor=EDITOR)
    return url("user", u=scope.user_id, done="deleted") + "#entities"


def relation_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    edits.delete_record(memory.store, scope, "relation", key_of(_field(form, "rk")), editor=EDITOR)
    return url("graph", u=scope.user_id, done="deleted")


def note_edit(memory: Memory, tenant: str, form: Form) -> str:
    scope = _thread(memory, tenant, form)
    edits.edit_note(memory.store, scope, _index(form), _field(form, "text"), expect=_field(form, "expect", blank=True), editor=EDITOR)
    return url("thread", u=scope.user_id, t=scope.thread_id, done="saved") + "#notes"


def note_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _thread(memory, tenant, form)
    edits.delete_note(memory.store, scope, _index(form), expect=_field(form, "expect", blank=True), editor=EDITOR)
    return url("thread", u=scope.user_id, t=scope.thread_id, done="deleted") + "#notes"


def saved_delete(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    memory.forget_saved(_field(form, "id"), user_id=scope.user_id, tenant=tenant, by=EDITOR)
    if not known_user(memory.store, scope):  # that was all the tenant had of them
        return url("users", done="forgot_saved")
    return url("user", u=scope.user_id, done="forgot_saved") + "#saved"


def thread_forget(memory: Memory, tenant: str, form: Form) -> str:
    scope = _thread(memory, tenant, form)
    if form.get("confirm") != scope.thread_id:
        raise Mismatch
    n = memory.forget(user_id=scope.user_id, thread_id=scope.thread_id, tenant=tenant, by=EDITOR)
    log.info("dashboard: tenant %s forgot a thread of a user (%d rows)", tenant, n)
    return url("user", u=scope.user_id, done="forgot_thread", n=n)


def user_forget(memory: Memory, tenant: str, form: Form) -> str:
    scope = _user(memory, tenant, form)
    if form.get("confirm") != scope.user_id:
        raise Mismatch
    n = memory.forget(user_id=scope.user_id, tenant=tenant, by=EDITOR)
    log.info("dashboard: tenant %s forgot a user (%d rows)", tenant, n)
    return url("users", done="forgot_user", n=n)


class Mismatch(Exception):
    """The typed confirmation did not match: nothing is deleted."""


def _user(memory: Memory, tenant: str, form: Form):
    scope = memory.scope(_field(form, "u"), tenant=tenant)
    require_user(memory, tenant, scope.user_id)
    return scope


def _thread(memory: Memory, tenant: str, form: Form):
    scope = memory.scope(_field(form, "u"), _field(form, "t"), tenant=tenant)
    require_thread(memory, tenant, scope.user_id, scope.thread_id)  # type: ignore[arg-type]
    return scope


ACTIONS: dict[str, Callable[[Memory, str, Form], str]] = {
    "state-set": state_set,
    "state-delete": state_delete,
    "attribute-set": attribute_set,
    "attribute-delete": attribute_delete,
    "entity-delete": entity_delete,
    "relation-delete": relation_delete,
    "note-edit": note_edit,
    "note-delete": note_delete,
    "saved-delete": saved_delete,
    "thread-forget": thread_forget,
    "user-forget": user_forget,
}


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def act(request: Request) -> Response:
    name = request.path_params["action"]
    tenant: str | None = None
    try:
        form = await _form(request)
        session.check_form(request, form)
        tenant = session.tenant_of(request)
        if name not in ACTIONS:
            raise ApiError(404, "not_found", f"no action {name!r}")
        target = await run_in_threadpool(ACTIONS[name], request.app.state.memory, tenant, form)
    except session.Refused as exc:
        return pages.refused(request, exc)
    except Mismatch:
        return page(request, "error.html", tenant=tenant, status=422, message_key="confirm_mismatch", message=None)
    except (MemstackError, ApiError) as exc:
        return pages.failed(request, exc, tenant)
    return session.remember(request, RedirectResponse(target, status_code=303))


async def login(request: Request) -> Response:
    try:
        form = await _form(request)
        session.check_form(request, form)
    except session.Refused as exc:
        return pages.refused(request, exc)
    response = RedirectResponse(url("users"), status_code=303)
    if not session.login(request, response, form.get("key", "")):
        return pages.login_failed(request)
    return session.remember(request, response)


async def logout(request: Request) -> Response:
    try:
        session.check_form(request, await _form(request))
    except session.Refused as exc:
        return pages.refused(request, exc)
    response = RedirectResponse("/ui/login", status_code=303)
    session.logout(response)
    return session.remember(request, response)
