"""The HTTP API's request and response bodies (pydantic, at the edge only), and their conversion
from the library's values. Validation here names the field; the library validates the rest."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from .. import layers as layer_registry
from ..errors import UsageError
from ..layers.state import state_value
from ..replaced import replaced_by, replaces_of
from ..types import Context, Hit, Message, Record, ThreadInfo, check_json, check_message

RecordKind = Literal["summary", "entity", "relation", "state"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    code: str = Field(description="stable: the error tree's code (invalid_input, user_not_found, upstream_timeout, ...)")
    message: str
    field: str | None = Field(None, description="the request field at fault, e.g. messages[0].role")


class ErrorOut(BaseModel):
    """Every error response's body."""

    error: ErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` documenting the error body for these statuses."""
    return {status: {"model": ErrorOut} for status in statuses}


def link(method: str, path: str, description: str, *, request_body: str | None = None, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link from a response to the operation ``method path`` of this API: which of its
    parameters (a runtime expression such as ``$request.path.user_id``, or a constant) come from
    the request or response it follows. Clients and fuzzers (schemathesis' stateful phase) follow
    them: a user's messages, once added, can be read, searched and deleted."""
    pointer = quote(path.replace("~", "~0").replace("/", "~1"), safe="~")
    out: dict[str, Any] = {"operationRef": f"#/paths/{pointer}/{method.lower()}", "description": description, "parameters": parameters}
    if request_body is not None:
        out["requestBody"] = request_body
    return out


# ---- messages -------------------------------------------------------------------------------


class ToolCallFunction(BaseModel):
    name: str
    arguments: str = "{}"


class ToolCallIn(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class MessageIn(Strict):
    """An OpenAI-shaped chat message; ``timestamp`` defaults to the request's ``at`` (else now)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    id: str | None = None
    timestamp: AwareDatetime | None = None
    metadata: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        # Python values, not JSON mode: that writes NaN and infinities as null, which the
        # library's rules then never see
        return self.model_dump(exclude_none=True)

    @model_validator(mode="after")
    def _is_a_message(self) -> MessageIn:
        """The library's own rules of a message (content not empty, a tool message's
        tool_call_id, a timestamp in range, JSON metadata, ...) checked here, item by item: its
        InvalidInput then names the item's path, ``messages[2].content``, which Memory.add,
        validating the batch, cannot."""
        for name in ("content", "metadata"):  # first: pydantic cannot even dump a value nested 300 deep
            if isinstance(value := getattr(self, name), (list, dict)):
                check_json(value, name)
        check_message(Message.from_dict(self.to_dict()))
        return self


class MessageOut(BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    id: str
    timestamp: datetime
    metadata: dict[str, Any] | None = None
    seq: int | None = None
    replaces: list[str] | None = Field(
        None, description="with ?replaced=include: the ids of the earlier answers this one replaces (a regenerate)"
    )
    replaced_by: str | None = Field(None, description="with ?replaced=include: the id of the answer that replaced this one")

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        return cls(**m.to_dict(), seq=m.seq)

    @classmethod
    def linked(cls, messages: list[Message]) -> list[MessageOut]:
        """Every message with which it replaces and which replaced it (``?replaced=include``)."""
        by = replaced_by(messages)
        return [cls(**m.to_dict(), seq=m.seq, replaces=replaces_of(m), replaced_by=by.get(m.id)) for m in messages]


class AddMessages(Strict):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "user", "content": "我正在开发一个知识中台，后端使用SpringBoot"},
                        {"role": "assistant", "content": "好的，记住了。"},
                    ],
                    "at": "2026-11-02T20:00:00+08:00",
                }
            ]
        }
    )

    messages: list[MessageIn] = Field(min_length=1, max_length=1000)
    #: the time of messages without a timestamp (default: now); timezone-aware
    at: AwareDatetime | None = None


class Stored(BaseModel):
    stored: list[MessageOut]


class ThreadOut(BaseModel):
    thread_id: str
    agent_id: str | None
    messages: int
    first_at: datetime
    last_at: datetime

    @classmethod
    def of(cls, t: ThreadInfo) -> ThreadOut:
        return cls(thread_id=t.thread_id, agent_id=t.agent_id, messages=t.messages, first_at=t.first_at, last_at=t.last_at)


class Deleted(BaseModel):
    deleted: int


# ---- context and search ---------------------------------------------------------------------


class ContextRequest(Strict):
    """The context for the next model call. Layer options not given keep the server's defaults."""

    query: str | None = Field(None, description="the user's next message (not stored), appended last")
    at: AwareDatetime | None = Field(None, description="reference time: only messages dated at or before it are seen (default: now)")
    strategy: str | None = Field(
        None, description="a comma-separated stack of layers (default: the server's)", examples=["window,retrieval"]
    )
    preset: str | None = Field(
        None, description="one of the articles' scenario stacks instead of strategy", examples=["personal-assistant"]
    )
    max_tokens: int | None = Field(None, ge=0, description="token budget of the whole context (null: unbounded; absent: the server's)")
    counter: str | None = Field(None, description="token counter: estimate, cl100k_base, o200k_base or a model name")
    k: int | None = Field(None, ge=0, description="turns the window layer keeps")
    top_k: int | None = Field(None, ge=1, description="units the retrieval layer returns at most")
    buffer_tokens: int | None = Field(None, ge=0, description="raw turns the summary-buffer layer keeps, in tokens")
    hops: int | None = Field(None, ge=0, le=3, description="relations the graph layer follows")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str | None) -> str | None:
        from ..presets import PRESETS

        if value is not None and value not in PRESETS:
            raise ValueError(f"unknown preset {value!r}; known: {', '.join(PRESETS)}")
        return value

    @field_validator("strategy")
    @classmethod
    def _known_layers(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                layer_registry.parse_stack(value)
            except UsageError as exc:
                raise ValueError(str(exc)) from exc
        return value

    def options(self) -> dict[str, Any]:
        return {k: v for k in ("k", "top_k", "buffer_tokens", "hops") if (v := getattr(self, k)) is not None}


class DroppedOut(BaseModel):
    layer: str
    reason: str
    message_ids: list[str]
    tokens: int


class ContextOut(BaseModel):
    messages: list[dict[str, Any]]
    tokens: int
    max_tokens: int | None
    counter: str
    sections: dict[str, int]
    dropped: list[DroppedOut]

    @classmethod
    def of(cls, ctx: Context) -> ContextOut:
        return cls(**ctx.to_dict())


class SearchRequest(Strict):
    query: str = Field(min_length=1)
    k: int | None = Field(None, ge=1, le=100, description="at most this many (default: the retrieval layer's top_k, 8 unless configured)")
    at: AwareDatetime | None = Field(None, description="reference time for dates the query names (default: now)")
    thread_ids: list[str] | None = Field(None, description="only these threads")


class HitOut(BaseModel):
    id: str
    score: float
    text: str
    thread_id: str | None
    timestamp: datetime
    source_ids: list[str]
    ranks: dict[str, int]
    kind: str = Field("round", description="turn, round, chunk, fact, summary or note (a saved memory)")
    category: str | None = Field(None, description="a saved memory's label")

    @classmethod
    def of(cls, h: Hit) -> HitOut:
        u = h.unit
        return cls(
            id=u.id,
            score=round(h.score, 6),
            text=u.text,
            thread_id=u.scope.thread_id,
            timestamp=u.timestamp,
            source_ids=list(u.source_ids),
            ranks=dict(h.ranks),
            kind=u.kind,
            category=u.category,
        )


# ---- model-made memory --------------------------------------------------------------------------


class RecordOut(BaseModel):
    id: str | None = None
    kind: str
    key: str
    value: Any = Field(
        description="the record's JSON object; a state record's value itself (any JSON value), as PUT .../state/{key} took it and the get_state tool reads it"
    )
    source_ids: list[str]
    valid_from: datetime | None
    version: int

    @classmethod
    def of(cls, r: Record) -> RecordOut:
        value = state_value(r) if r.kind == "state" else dict(r.value)
        return cls(id=r.id, kind=r.kind, key=r.key, value=value, source_ids=list(r.source_ids), valid_from=r.valid_from, version=r.version)


class StateValue(Strict):
    value: Any = Field(description="any JSON value")


class AttributeValue(Strict):
    value: str = Field(
        description="the attribute's one current value; the values it replaces become past ones, dated until now", examples=["深圳"]
    )


class NoteEdit(Strict):
    text: str = Field(description="the note's new text (its date and sources stay)", examples=["用户的后端改用Go"])
    expect: str = Field(
        description="the note's text as it was read: if the summary changed since (a job rewrote it), nothing changes and the answer is 409"
    )


class DeletionOut(BaseModel):
    """The note a deletion left: what was forgotten and by whom, never its content nor its id."""

    at: datetime
    kind: Literal["user", "thread", "note", "expired"] = Field(
        description="a whole user, one thread, one saved memory, or what a retention pass found older than the tenant's policy keeps"
    )
    layer: str | None = Field(description="who forgot: api, ui, cli, tools, library (null in notes from before it was kept)")
    rows: int
    counts: dict[str, int] = Field(description="the rows by what they were: messages, memories, audit, usage, units, vectors, other")
    user_hash: str = Field(description="a keyed hash of the user id (the store's own key): the same for one user in every note")
    target_hash: str | None = Field(description="a keyed hash of the thread or saved memory; null for a user")


class RetentionRunOut(BaseModel):
    """One retention pass over the tenant (``memstack.expiry``)."""

    at: datetime
    policy: dict[str, str] = Field(description="the policy the pass applied")
    users: int = Field(description="the users it deleted something of")
    rows: int
    counts: dict[str, int] = Field(description="the rows by what they were: messages, memories, audit, usage, units, vectors")


class RetentionOut(BaseModel):
    """How long the tenant's memory is kept (``memstack init --retain``) and its last pass."""

    tenant: str
    policy: dict[str, str] = Field(
        description='each limited kind\'s duration ("180d"; a kind not named is kept for ever) and "derived": delete or keep'
    )
    keeps_everything: bool
    last_run: RetentionRunOut | None = Field(description="null before the first pass")


class AuditOut(BaseModel):
    at: datetime
    layer: str
    kind: str
    key: str
    action: str
    thread_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    source_ids: list[str]


class UsageOut(BaseModel):
    totals: dict[str, dict[str, Any]]
    calls: list[dict[str, Any]]


# ---- import / export -------------------------------------------------------------------------


class Export(BaseModel):
    records: list[dict[str, Any]] = Field(description="one message per record, with its thread_id (the JSON-lines export's records)")


class Import(Strict):
    records: list[dict[str, Any]] = Field(min_length=1, description="exported records; user_id may be left out (the path's)")


class Imported(BaseModel):
    imported: int
    records: int


# ---- the write queue and saved memories ----------------------------------------------------------


class Pending(BaseModel):
    pending: int = Field(description="the user's write-side jobs with work not done yet (messages not yet indexed or extracted)")


class JobsRun(BaseModel):
    ran: int
    failed: int
    waited: int = Field(description="jobs put off because the tenant's (or user's) cost ceiling is spent")
    errors: list[str]


class SavedOut(BaseModel):
    """A saved memory (the tools' note or key/value memory), as it was deleted."""

    id: str
    text: str
    timestamp: datetime
    category: str | None
    metadata: dict[str, Any]


# ---- service ---------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"]
    pending_jobs: int


# ---- the OpenAI-compatible proxy ---------------------------------------------------------------


class ChatMessageIn(BaseModel):
    """An OpenAI chat message; fields beyond these are forwarded as sent."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """OpenAI's chat completion request; fields beyond these are forwarded to an HTTP upstream."""

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, description="ignored: the server's upstream model answers")
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    user: str | None = Field(None, description="whose memory (else the X-Memstack-User header)")
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stream_options: dict[str, Any] | None = None

    def params(self) -> dict[str, Any]:
        """Everything but the messages, the model and ``stream``: what the upstream is also sent."""
        return self.model_dump(exclude={"messages", "model", "stream"}, exclude_none=True)


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "memstack"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]

    @classmethod
    def of(cls, *models: str) -> ModelList:
        return cls(data=[ModelOut(id=m) for m in models])
