"""The tool-based memory over HTTP: the same typed functions as the OpenAI tool schemas and the MCP
server (``memstack.tools``), so an agent written in any language can let its model call them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from ..tools import memory_tools
from .deps import AsyncMem, Mem, Tenant, UserId
from .schemas import error_responses

router = APIRouter(tags=["tools"], responses=error_responses(400, 401, 413, 422, 503))


#: ``?form=key-value``: the articles' save_memory(key, value) / recall_memory(key) instead of the notes
Form = Annotated[
    Literal["notes", "key-value"],
    Query(description="notes: save_memory(content), recall_memory(query); key-value: save_memory(key, value), recall_memory(key)"),
]


class ToolCall(BaseModel):
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments, as its schema in GET /v1/tools says")


class ToolResult(BaseModel):
    tool: str
    result: str = Field(description="the text for the model; a model's mistake comes back as 'error: ...'")


@router.get("/v1/tools", summary="The memory tools as OpenAI function-calling schemas")
def list_tools(memory: Mem, tenant: Tenant, form: Form = "notes") -> list[dict[str, Any]]:
    return memory_tools(memory, "schema", form=form, tenant=tenant).openai_tools()


@router.post("/v1/users/{user_id}/tools/{name}", summary="Run one memory tool for a user (save, recall, forget, get/set state)")
async def call_tool(
    user_id: UserId,
    name: str,
    body: ToolCall,
    memory: AsyncMem,
    tenant: Tenant,
    thread_id: Annotated[str | None, Query()] = None,
    form: Form = "notes",
) -> ToolResult:
    tools = memory_tools(memory.memory, user_id, thread_id, form=form, tenant=tenant)
    return ToolResult(tool=name, result=await memory.run_sync(tools.call, name, body.arguments))
