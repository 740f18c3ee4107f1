"""Dify's External Knowledge API over a user's memory: ``POST /dify/retrieval``.

A Dify app reads an external knowledge base by posting ``knowledge_id``, ``query``,
``retrieval_setting`` (``top_k``, ``score_threshold``) and an optional ``metadata_condition`` to
``{endpoint}/retrieval`` with ``Authorization: Bearer {API key}``, and reads back ``records`` of
``content``, ``score``, ``title`` and ``metadata``. Here the endpoint is the service's ``/dify``
(register ``http://HOST:8000/dify`` in Dify), the key is a memstack API key (its tenant decides
whose users the knowledge ids name), and ``knowledge_id`` is a user of that tenant: the records
are that user's memories most relevant to the query, across threads (``Memory.search``). A
knowledge base the whole tenant shares is a user too (``handbook``), whose threads the app fills.

Decisions:
- ``score`` is each record's fused search score as a share of the best record's (the best is
  1.0): memstack's search ranks by reciprocal rank fusion, whose raw scores are not similarities,
  and it already leaves out what is unrelated to the query (a question about nothing the user
  said gets no records, whatever the threshold). ``score_threshold`` then keeps the records at
  least that close to the best; Dify sends 0.0 when its threshold is off.
- ``metadata_condition`` is applied to the records' metadata (``dify_filter``: thread, time,
  kind, roles, ...); the part memstack's search can apply itself (threads, kinds, categories, a
  time range) is applied there, so ``top_k`` records still come back from a narrow filter.
- ``top_k`` null (Dify sends it so when unset) is ``DEFAULT_TOP_K``; a null threshold is 0.
- Errors have Dify's shape, ``{"error_code", "error_msg"}``, with memstack's error object beside
  it (``"error": {"code", "message", "field"}``): 1001 (403) an Authorization header that is not
  ``Bearer KEY``, 1002 (403) an unknown key, 2001 (404) a knowledge id the tenant has no user
  for; other errors carry their HTTP status as ``error_code``: 422 invalid input (the field
  named), 503 the store unreachable. With no API keys configured (a loopback-only service) the
  header is not checked, as on every route.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import InvalidInput, MemstackError
from ..types import Hit, Scope, check_text
from ..views import known_user
from .deps import AsyncMem
from .dify_filter import MetadataFilter, parse_filter, record_metadata
from .errors import body_error, field_of, status_of
from .schemas import ErrorDetail

log = logging.getLogger("memstack.server")

#: records when Dify sends ``top_k: null``
DEFAULT_TOP_K = 4
MAX_TOP_K = 100
#: hits searched when a metadata condition is applied after the search: top_k times this, at least MIN_CANDIDATES
CANDIDATES_PER_RECORD = 4
MIN_CANDIDATES = 20

BAD_HEADER, AUTH_FAILED, NO_KNOWLEDGE = 1001, 1002, 2001
_BEARER = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="DifyBearer",
    description="a memstack API key, as Dify sends it (its tenant's users are the knowledge ids)",
)


# ---- the request and the response, as Dify's documentation has them ---------------------------


class RetrievalSetting(BaseModel):
    top_k: int | None = Field(None, ge=1, le=MAX_TOP_K, description=f"records at most (null: {DEFAULT_TOP_K})")
    score_threshold: float | None = Field(
        0.0, ge=0.0, le=1.0, allow_inf_nan=False, description="keep records scoring at least this (0.0: all)"
    )


class ConditionIn(BaseModel):
    name: str | list[str] = Field(description="a field of the records' metadata (thread_id, time, kind, roles, ...)")
    comparison_operator: str = Field(description="contains, is, in, empty, =, >, before, after, ... (see the docs)")
    value: str | int | float | list[str] | None = Field(None, description="omitted for empty and not empty")


class MetadataConditionIn(BaseModel):
    logical_operator: str | None = Field("and", description="and (default) or or")
    conditions: list[ConditionIn] | None = None


class RetrievalRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")  # fields a later Dify adds are ignored, not refused

    knowledge_id: str = Field(description="a user of the API key's tenant: the knowledge base is that user's memory")
    query: str = Field(description="the question to find memories for")
    retrieval_setting: RetrievalSetting
    metadata_condition: MetadataConditionIn | None = None


class Record(BaseModel):
    content: str
    score: float = Field(description="in [0, 1]: the record's search score as a share of the best record's")
    title: str = Field(description="the thread and the day it was said: 's1 · 2026-11-02'")
    metadata: dict[str, Any] = Field(description="id, thread_id, timestamp, time, kind, round, category, lang, roles, source_ids")


class RetrievalResponse(BaseModel):
    records: list[Record]


class DifyErrorOut(BaseModel):
    error_code: int = Field(
        description="1001 bad Authorization header, 1002 authorization failed, 2001 no such knowledge; else the HTTP status"
    )
    error_msg: str
    error: ErrorDetail


# ---- errors in Dify's shape ------------------------------------------------------------------


class DifyError(Exception):
    def __init__(self, status: int, error_code: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.error_code, self.code, self.field = status, error_code, code, field

    def response(self) -> JSONResponse:
        detail = {"code": self.code, "message": str(self), "field": self.field}
        return JSONResponse({"error_code": self.error_code, "error_msg": str(self), "error": detail}, status_code=self.status)


def _invalid(field: str, message: str) -> DifyError:
    return DifyError(422, 422, InvalidInput.code, message, field)


class DifyRoute(APIRoute):
    """A route whose every failure answers in Dify's error shape (``DifyError``), the request's
    validation and the library's errors included; unexpected ones are logged, and answer 500."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def dify_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except DifyError as exc:
                return exc.response()
            except RequestValidationError as exc:
                return _validation_error(exc).response()
            except StarletteHTTPException as exc:
                unreadable = body_error(exc)
                if unreadable is None:
                    raise
                return _invalid("body", f"body: {unreadable}").response()
            except MemstackError as exc:
                status = status_of(exc)
                return DifyError(status, status, exc.code, str(exc), getattr(exc, "field", None)).response()
            except Exception:
                log.exception("%s %s: unexpected error", request.method, request.url.path)
                return DifyError(500, 500, "internal_error", "internal error").response()

        return dify_handler


def _validation_error(exc: RequestValidationError) -> DifyError:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
    field = "body" if first.get("type") == "json_invalid" else field_of(tuple(first.get("loc", ())))
    return _invalid(field, f"{field}: {str(first.get('msg', 'invalid')).removeprefix('Value error, ')}")


# ---- the route -------------------------------------------------------------------------------


router = APIRouter(prefix="/dify", tags=["dify"], route_class=DifyRoute)


async def dify_tenant(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None) -> str:
    """The tenant of the request's ``Authorization: Bearer KEY`` (1001, 1002 otherwise); any
    request is the default tenant when the service has no keys."""
    auth = request.app.state.auth
    if not auth.keys:
        return str(auth.default_tenant)
    found = _BEARER.match(request.headers.get("authorization", ""))
    if found is None:
        raise DifyError(403, BAD_HEADER, "unauthorized", "Invalid Authorization header format. Expected 'Bearer <api-key>' format.")
    key = found.group(1).encode()
    for known, tenant in auth.keys.items():
        if hmac.compare_digest(known.encode(), key):
            return str(tenant)
    raise DifyError(403, AUTH_FAILED, "unauthorized", "Authorization failed: unknown API key.")


@router.post(
    "/retrieval",
    summary="Dify's External Knowledge API: a user's memories as a knowledge base",
    responses={
        403: {"model": DifyErrorOut, "description": "1001: not 'Authorization: Bearer KEY'; 1002: unknown key"},
        404: {"model": DifyErrorOut, "description": "2001: the knowledge id is no user of the key's tenant"},
        422: {"model": DifyErrorOut, "description": "invalid input: the field is named"},
        503: {"model": DifyErrorOut, "description": "the store is unreachable"},
    },
)
async def retrieval(body: RetrievalRequest, tenant: Annotated[str, Depends(dify_tenant)], memory: AsyncMem) -> RetrievalResponse:
    condition = body.metadata_condition
    where = (
        parse_filter(condition.logical_operator, [c.model_dump() for c in condition.conditions or ()]) if condition else MetadataFilter()
    )
    scope = _knowledge(body.knowledge_id, tenant)
    if not body.query.strip():
        raise _invalid("query", "query: must not be empty")
    check_text(body.query, "query")  # a lone surrogate: 422 here, not an error deep in the embedder
    if not await memory.run_sync(known_user, memory.store, scope):
        raise DifyError(
            404, NO_KNOWLEDGE, "knowledge_not_found", f"The knowledge does not exist: no user {body.knowledge_id!r}", "knowledge_id"
        )
    setting = body.retrieval_setting
    top_k = setting.top_k or DEFAULT_TOP_K
    k = top_k if not where.conditions else min(MAX_TOP_K, max(top_k * CANDIDATES_PER_RECORD, MIN_CANDIDATES))
    hits = await memory.search(body.query, user_id=scope.user_id, tenant=tenant, k=k, where=where.search_filter())
    kept = [(h, meta) for h in hits if where.keeps(meta := record_metadata(h))]
    return RetrievalResponse(records=_records(kept, top_k, setting.score_threshold or 0.0))


def _knowledge(knowledge_id: str, tenant: str) -> Scope:
    try:
        return Scope(user_id=knowledge_id, tenant=tenant)
    except InvalidInput as exc:
        raise _invalid("knowledge_id", f"knowledge_id: {exc}") from exc


def _records(kept: list[tuple[Hit, dict[str, Any]]], top_k: int, threshold: float) -> list[Record]:
    """The records, best first: scored against the best, those under ``threshold`` left out."""
    best = max((h.score for h, _ in kept), default=0.0)
    out = []
    for hit, meta in kept:
        score = round(hit.score / best, 4) if best > 0 else 0.0
        if score >= threshold:
            title = f"{hit.unit.scope.thread_id} · {hit.unit.timestamp.date().isoformat()}"
            out.append(Record(content=hit.unit.text, score=score, title=title, metadata=meta))
    return out[:top_k]
