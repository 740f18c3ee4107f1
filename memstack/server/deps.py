"""What every handler is given: the app's AsyncMemory (the REST API's and the proxy's ``async``
routes await it: the event loop never blocks on the store) or its Memory (for ``def`` routes,
which FastAPI runs in its threadpool), the caller's tenant, and existence checks that answer 404
for a user or thread the tenant does not have (another tenant's user included)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..aio import AsyncMemory
from ..memory import Memory
from ..types import MAX_ID_LENGTH
from ..views import known_user
from .errors import ApiError

#: declares the bearer scheme in the OpenAPI document; the check itself is Auth.tenant_for
_bearer = HTTPBearer(auto_error=False, description="an API key configured for one tenant (none needed when the server has no keys)")


def memory_of(request: Request) -> Memory:
    return request.app.state.memory


# (async, so that FastAPI calls them on the loop instead of sending each to its threadpool)
async def async_memory_of(request: Request) -> AsyncMemory:
    return request.app.state.async_memory


async def tenant_of(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None) -> str:
    return request.app.state.auth.tenant_for(request)


Mem = Annotated[Memory, Depends(memory_of)]
AsyncMem = Annotated[AsyncMemory, Depends(async_memory_of)]
Tenant = Annotated[str, Depends(tenant_of)]

#: the library's rule of an id (a user's, a thread's), stated in the OpenAPI document: 1 to
#: MAX_ID_LENGTH characters, not only spaces, no control characters. The library checks it (422
#: naming the field, in its words); the document says it, so that a client, or a fuzzer, knows.
ID_PATTERN = r"^[^\x00-\x1f]*[^\s\x00-\x1f][^\x00-\x1f]*$"


def _id(what: str) -> Any:
    return Path(
        description=f"{what}: 1 to {MAX_ID_LENGTH} characters, not only spaces, no control characters",
        json_schema_extra={"maxLength": MAX_ID_LENGTH, "pattern": ID_PATTERN},
    )


UserId = Annotated[str, _id("the user's id")]
ThreadId = Annotated[str, _id("the thread's id")]


def require_user(memory: Memory, tenant: str, user_id: str) -> None:
    """404 unless the tenant has this user: messages in some thread, model-made memory, or a saved memory."""
    if not known_user(memory.store, memory.scope(user_id, tenant=tenant)):
        raise _no_user(user_id)


def require_thread(memory: Memory, tenant: str, user_id: str, thread_id: str) -> None:
    """404 unless the tenant's user has this thread."""
    threads = memory.threads(user_id=user_id, tenant=tenant)
    if not threads:
        require_user(memory, tenant, user_id)
    if not any(t.thread_id == thread_id for t in threads):
        raise _no_thread(user_id, thread_id)


async def user_or_404(memory: AsyncMemory, tenant: str, user_id: str) -> None:
    """``require_user``, awaited."""
    if not await memory.run_sync(known_user, memory.store, memory.scope(user_id, tenant=tenant)):
        raise _no_user(user_id)


async def thread_or_404(memory: AsyncMemory, tenant: str, user_id: str, thread_id: str) -> None:
    """``require_thread``, awaited."""
    threads = await memory.threads(user_id=user_id, tenant=tenant)
    if not threads:
        await user_or_404(memory, tenant, user_id)
    if not any(t.thread_id == thread_id for t in threads):
        raise _no_thread(user_id, thread_id)


def _no_user(user_id: str) -> ApiError:
    return ApiError(404, "user_not_found", f"no user {user_id!r}", field="user_id")


def _no_thread(user_id: str, thread_id: str) -> ApiError:
    return ApiError(404, "thread_not_found", f"user {user_id!r} has no thread {thread_id!r}", field="thread_id")
