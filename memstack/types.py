"""Value types shared by every module: frozen dataclasses, validated on construction, no I/O.

Messages follow the OpenAI chat shape (role, content as text or content parts, name, tool_calls,
tool_call_id) plus an id, an explicit timezone-aware timestamp and free metadata. A Scope names
whose data a record is; it is part of every store key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Literal

from .errors import InvalidInput

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
MAX_ID_LENGTH = 256
#: the years (in UTC) a message's timestamp or an ``at`` may name: every store can hold them and
#: every reader's date arithmetic (a week before, a day after) stays within what Python can date
MIN_YEAR, MAX_YEAR = 1900, 9000
#: how deep metadata and state values (JSON) may nest: objects and arrays within one another
MAX_JSON_DEPTH = 64
#: a state key's length in characters (the set_state tool, the REST API, the state layer alike)
MAX_STATE_KEY_CHARS = 128
#: the most messages a history read's ``last`` may ask for (a store's integers are 64-bit)
MAX_LAST = 2**31 - 1


def utcnow() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(timezone.utc)


def user_digest(user_id: str) -> str:
    """A user id's sha256 (hex): what the record of a deletion keeps instead of the id itself, so
    that it holds no personal data yet can answer "was this user deleted?"."""
    import hashlib

    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()


def new_id() -> str:
    """A new random message id (uuid4 hex)."""
    return uuid.uuid4().hex


def aware(value: datetime, *, field_name: str = "timestamp") -> datetime:
    """Return ``value`` if it carries a time zone; naive datetimes are ambiguous and rejected."""
    if not isinstance(value, datetime):
        raise InvalidInput(f"{field_name} must be a datetime, got {type(value).__name__}", field=field_name)
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(f"{field_name} must be timezone-aware (e.g. 2024-05-01T10:00:00+08:00)", field=field_name)
    return value


def in_range(value: datetime, *, field_name: str = "timestamp") -> datetime:
    """Return ``value`` if it is timezone-aware and its instant falls in years MIN_YEAR..MAX_YEAR
    in UTC. ``9999-12-31T23:59:59-14:00`` is in year 10000 in UTC, past what a datetime can hold:
    stored, it would break every read that converts it."""
    aware(value, field_name=field_name)
    try:
        year: int | None = (value.replace(tzinfo=None) - value.utcoffset()).year  # type: ignore[operator]
    except OverflowError:
        year = None
    if year is None or not MIN_YEAR <= year <= MAX_YEAR:
        raise InvalidInput(f"{field_name}: {value.isoformat()} is outside the years {MIN_YEAR} to {MAX_YEAR} (UTC)", field=field_name)
    return value


def check_text(value: object, field_name: str, *, what: str = "a string") -> str:
    """Return ``value`` if it is a string every store can hold: no NUL, no lone surrogate (a
    ``\\ud800`` escape in JSON decodes to one, and UTF-8 cannot encode it)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field_name} must be a string, got {type(value).__name__}", field=field_name)
    if "\x00" in value:
        raise InvalidInput(f"{field_name}: {what} contains a NUL character", field=field_name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{field_name}: {what} is not valid UTF-8 text (a lone surrogate at character {exc.start})", field=field_name
        ) from exc
    return value


def check_json(value: object, field_name: str, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse what is not plain JSON every store keeps and every reader returns as it was given:
    objects with string keys, arrays, strings (``check_text``), finite numbers, true, false and
    null, objects and arrays nested at most ``max_depth`` deep. NaN and infinities are refused,
    not stored as null."""
    todo: list[tuple[object, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if depth >= max_depth:
                raise InvalidInput(f"{field_name} is nested more than {max_depth} deep", field=field_name)
            if isinstance(item, Mapping):
                for key in item:
                    if not isinstance(key, str):
                        raise InvalidInput(f"{field_name}: an object key must be a string, got {type(key).__name__}", field=field_name)
                    check_text(key, field_name, what="a key")
                todo.extend((v, depth + 1) for v in item.values())
            else:
                todo.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            check_text(item, field_name)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InvalidInput(f"{field_name}: {item} is not a JSON number", field=field_name)
        elif item is not None and not isinstance(item, (bool, int)):
            raise InvalidInput(f"{field_name}: {type(item).__name__} is not a JSON value", field=field_name)


def check_state_key(key: object, field_name: str = "key") -> str:
    """A state key: 1 to MAX_STATE_KEY_CHARS characters, no control characters, no spaces around
    it (the set_state tool strips them first). One rule for the tool, the REST API and the layer."""
    if not isinstance(key, str) or not key or key != key.strip() or len(key) > MAX_STATE_KEY_CHARS or any(ord(c) < 32 for c in key):
        raise InvalidInput(
            f"a state key must be 1 to {MAX_STATE_KEY_CHARS} characters without control characters or surrounding spaces", field=field_name
        )
    return check_text(key, field_name, what="the key")


def check_message(message: Message) -> Message:
    """The rules a message must meet to be stored, beyond its type's (which every stored message,
    older ones included, meets so that it can be read back): a timestamp in years
    MIN_YEAR..MAX_YEAR, text parts with string text, a name and tool call ids as ids are, JSON
    metadata. ``Memory.add`` and ``import_`` apply them; the REST API item by item, so that its
    422 names the item (``messages[2].name``)."""
    in_range(message.timestamp, field_name="timestamp")
    if isinstance(message.content, tuple):
        for part in message.content:
            if part.get("type") == "text" and not isinstance(part.get("text"), str):
                raise InvalidInput("a text content part needs a string 'text'", field="content")
        check_json(list(message.content), "content")
    if message.name is not None:
        _check_id(message.name, "name", required=False)
    for i, call in enumerate(message.tool_calls):
        _check_id(call.id, f"tool_calls[{i}].id", required=True)
        _check_id(call.name, f"tool_calls[{i}].function.name", required=True)
        check_text(call.arguments, f"tool_calls[{i}].function.arguments")
    if message.tool_call_id is not None:
        _check_id(message.tool_call_id, "tool_call_id", required=False)
    if not isinstance(message.metadata, Mapping):
        raise InvalidInput("metadata must be a JSON object", field="metadata")
    check_json(message.metadata, "metadata")
    return message


#: the orders a thread's history reads in: as appended (what the write queue's cursors, seqs,
#: follow) or by timestamp, ties as appended (what a person reading a thread expects: an imported
#: or back-dated message goes in its place)
HISTORY_ORDERS = ("append", "time")


def by_time(order: str) -> bool:
    """Whether a history read is in time order; any order but HISTORY_ORDERS is InvalidInput."""
    if order not in HISTORY_ORDERS:
        raise InvalidInput(f"order must be one of {', '.join(HISTORY_ORDERS)}, not {order!r}", field="order")
    return order == "time"


def parse_time(text: str, *, field_name: str = "at") -> datetime:
    """Parse an ISO 8601 datetime with a UTC offset (``Z`` for UTC). One without an offset (a bare
    date included) is refused, as ``aware`` refuses a naive datetime and the REST API answers 422:
    the same clock time is a different instant in every zone, and guessing UTC misdates the
    message silently."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(
            f"{field_name}: not an ISO 8601 date/time: {text!r}; expected e.g. 2026-03-01T09:00:00+08:00", field=field_name
        ) from exc
    if value.tzinfo is None or value.utcoffset() is None:
        stamp = value.isoformat()
        raise InvalidInput(
            f"{field_name}: {text.strip()!r} has no UTC offset; write it with one, e.g. {stamp}+08:00 (or {stamp}Z for UTC)",
            field=field_name,
        )
    return value


def _check_id(value: object, name: str, *, required: bool) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} is required and must be a non-empty string", field=name)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{name} is longer than {MAX_ID_LENGTH} characters", field=name)
    if any(ord(c) < 32 for c in value):
        raise InvalidInput(f"{name} must not contain control characters", field=name)
    check_text(value, name)


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose data: tenant > user > (agent) > thread. ``user_id`` is required for every record.

    ``thread_id`` None means user-level (e.g. a user's state across threads); ``agent_id`` None
    means no particular agent. Both are part of store keys as given.
    """

    user_id: str
    thread_id: str | None = None
    tenant: str = "default"
    agent_id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.user_id, "user_id", required=True)
        _check_id(self.tenant, "tenant", required=True)
        _check_id(self.thread_id, "thread_id", required=False)
        _check_id(self.agent_id, "agent_id", required=False)

    def thread(self, thread_id: str) -> Scope:
        """The same user (and agent) in another thread."""
        return replace(self, thread_id=thread_id)

    def user(self) -> Scope:
        """The user-level scope (no thread)."""
        return replace(self, thread_id=None)

    def require_thread(self) -> Scope:
        if self.thread_id is None:
            raise InvalidInput("thread_id is required here", field="thread_id")
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(tenant, user_id, agent_id or '', thread_id or ''): the key every store indexes on."""
        return (self.tenant, self.user_id, self.agent_id or "", self.thread_id or "")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call requested by the assistant (OpenAI ``tool_calls`` item)."""

    id: str
    name: str
    arguments: str = "{}"

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> ToolCall:
        try:
            fn = data["function"]
            args = fn.get("arguments", "{}")
            if not isinstance(data["id"], str) or not isinstance(fn["name"], str):
                raise TypeError("a tool call's id and function name are strings")
            return cls(id=data["id"], name=fn["name"], arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise InvalidInput(f"malformed tool call: {data!r}", field="tool_calls") from exc


Content = str | tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message in the OpenAI shape, with id, timestamp and metadata.

    ``seq`` is assigned by the history store (increasing in append order within a store) and is
    None on messages that have not been stored.
    """

    role: Role
    content: Content = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    id: str = field(default_factory=new_id)
    timestamp: datetime = field(default_factory=utcnow)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    seq: int | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidInput(f"unknown role {self.role!r}; expected one of {', '.join(ROLES)}", field="role")
        if isinstance(self.content, list):
            object.__setattr__(self, "content", tuple(self.content))
        if not isinstance(self.content, (str, tuple)):
            raise InvalidInput("content must be a string or a list of content parts", field="content")
        if isinstance(self.content, tuple):
            for part in self.content:
                if not isinstance(part, Mapping) or "type" not in part:
                    raise InvalidInput("each content part must be an object with a 'type'", field="content")
        if isinstance(self.tool_calls, list):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not self.text.strip() and not self.tool_calls and not self._has_non_text_parts():
            raise InvalidInput(f"{self.role} message content is empty", field="content")
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInput("a tool message needs tool_call_id", field="tool_call_id")
        if self.tool_calls and self.role != "assistant":
            raise InvalidInput("only assistant messages carry tool_calls", field="tool_calls")
        _check_id(self.id, "id", required=True)
        aware(self.timestamp)

    def _has_non_text_parts(self) -> bool:
        return isinstance(self.content, tuple) and any(p.get("type") != "text" for p in self.content)

    @property
    def text(self) -> str:
        """The text of the content (text parts joined by newlines)."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")

    def to_openai(self) -> dict[str, Any]:
        """The message as an OpenAI chat API dict (no id, timestamp or metadata)."""
        out: dict[str, Any] = {
            "role": self.role,
            "content": self.content if isinstance(self.content, str) else [dict(p) for p in self.content],
        }
        if self.name:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
            if not self.text:
                out["content"] = None
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        return out

    def to_dict(self) -> dict[str, Any]:
        """Lossless JSON-ready dict (OpenAI fields plus id, timestamp, metadata)."""
        out = self.to_openai()
        out["content"] = self.content if isinstance(self.content, str) else [dict(p) for p in self.content]
        out["id"] = self.id
        out["timestamp"] = self.timestamp.isoformat()
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **overrides: Any) -> Message:
        """Build a Message from an OpenAI-shaped dict (``to_dict`` output round-trips)."""
        if not isinstance(data, Mapping):
            raise InvalidInput("a message must be a JSON object")
        kwargs: dict[str, Any] = {"role": data.get("role"), "content": data.get("content") or ""}
        if data.get("name"):
            kwargs["name"] = data["name"]
        if data.get("tool_calls"):
            if not isinstance(data["tool_calls"], (list, tuple)):
                raise InvalidInput("tool_calls must be a list of tool calls", field="tool_calls")
            kwargs["tool_calls"] = tuple(ToolCall.from_openai(tc) for tc in data["tool_calls"])
        if data.get("tool_call_id"):
            kwargs["tool_call_id"] = data["tool_call_id"]
        if data.get("id"):
            kwargs["id"] = str(data["id"])
        ts = data.get("timestamp")
        if ts:
            kwargs["timestamp"] = ts if isinstance(ts, datetime) else parse_time(str(ts), field_name="timestamp")
        if data.get("metadata") is not None:
            if not isinstance(data["metadata"], Mapping):
                raise InvalidInput(f"metadata must be a JSON object, not {type(data['metadata']).__name__}", field="metadata")
            kwargs["metadata"] = dict(data["metadata"])
        kwargs.update(overrides)
        return cls(**kwargs)


def as_message(value: Message | Mapping[str, Any]) -> Message:
    """Accept a Message or an OpenAI-shaped dict."""
    return value if isinstance(value, Message) else Message.from_dict(value)


@dataclass(frozen=True, slots=True)
class Turn:
    """A user message with everything that answers it (assistant replies, tool calls and results).

    A turn with ``user`` None holds messages that came before any user message (e.g. a greeting).
    """

    messages: tuple[Message, ...]

    @property
    def user(self) -> Message | None:
        first = self.messages[0] if self.messages else None
        return first if first is not None and first.role == "user" else None


def group_turns(messages: Iterable[Message]) -> list[Turn]:
    """Split non-system messages into turns; each turn starts at a user message."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return [Turn(tuple(t)) for t in turns]


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread of a user, as listed by a history store."""

    thread_id: str
    agent_id: str | None
    messages: int
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A saved snapshot of a thread's state (JSON-serialisable ``data``)."""

    id: str
    scope: Scope
    created_at: datetime
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed unit of write-side work: run ``layer`` over a thread's messages after ``cursor``.

    One job row exists per (scope, layer); ``version`` counts the requests seen when claimed.
    """

    scope: Scope
    layer: str
    version: int
    cursor: int
    attempts: int
    worker: str
    last_error: str | None = None
    #: claimed with no request pending: the turns its layer held back for a fuller batch, taken by a
    #: flush or because the thread went quiet; the layer runs them now, as at a flush
    final: bool = False


@dataclass(frozen=True, slots=True)
class StateDocument:
    """One JSON document of a StateStore (``StateStore.dump``): its scope, name and value."""

    scope: Scope
    name: str
    value: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class JobCursor:
    """Where a layer's write-side work on a thread stands (``JobQueue.cursors``): the last message
    seq it consumed, whether more work is requested, and whether it holds turns back for a fuller
    batch; what a copy of the store carries so that no layer reads the thread again."""

    scope: Scope
    layer: str
    cursor: int
    pending: bool = False
    waiting: bool = False


@dataclass(frozen=True, slots=True)
class Section:
    """A block of memory text for the system prompt, produced by a layer's read side.

    Lower ``priority`` values are kept first when the budget is short.
    """

    name: str
    text: str
    priority: int = 50
    source_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Dropped:
    """Something left out of a context, and why (for the context report)."""

    layer: str
    reason: str
    message_ids: tuple[str, ...] = ()
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer, "reason": self.reason, "message_ids": list(self.message_ids), "tokens": self.tokens}


@dataclass(frozen=True, slots=True)
class Context:
    """What to send to a chat API next, with a report of its cost and of what was dropped."""

    messages: tuple[Message, ...]
    tokens: int
    sections: Mapping[str, int]
    dropped: tuple[Dropped, ...]
    max_tokens: int | None
    counter: str

    def to_openai(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.messages]

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.to_openai(),
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "counter": self.counter,
            "sections": dict(self.sections),
            "dropped": [d.to_dict() for d in self.dropped],
        }

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


UNIT_KINDS: tuple[str, ...] = ("turn", "round", "chunk", "fact", "summary", "note")


@dataclass(frozen=True, slots=True)
class Unit:
    """A retrievable piece of memory: a turn, a user/assistant round, a chunk of a long turn, or
    (with the LLM layers) an extracted fact or summary that points back to its source messages.

    ``scope`` is the thread it came from (tenant, user, agent, thread); ``round`` counts user
    turns in that thread from 1; ``source_ids`` are the message ids its text was taken from.
    """

    id: str
    scope: Scope
    text: str
    timestamp: datetime
    kind: str = "round"
    round: int | None = None
    category: str | None = None
    source_ids: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_id(self.id, "unit id", required=True)
        if not isinstance(self.text, str) or not self.text.strip():
            raise InvalidInput("unit text is empty", field="text")
        if self.kind not in UNIT_KINDS:
            raise InvalidInput(f"unknown unit kind {self.kind!r}; expected one of {', '.join(UNIT_KINDS)}", field="kind")
        self.scope.require_thread()
        aware(self.timestamp)
        if isinstance(self.source_ids, list):
            object.__setattr__(self, "source_ids", tuple(self.source_ids))


#: "rejected": a statement of the model's that the user's words did not support, kept with its
#: reason so that the audit trail shows what was not stored and why (``layers.verify``)
RECORD_KINDS: tuple[str, ...] = ("summary", "entity", "relation", "state", "rejected")


@dataclass(frozen=True, slots=True)
class Record:
    """A piece of model-made memory: a thread's summary, or a user's entity, relation or state key.

    ``key`` is unique among the *current* records of (scope, kind): an entity's canonical name
    (case-folded), a relation's "source\x1frelation\x1ftarget", a state key, "summary". A changed
    value supersedes the current record: the old one keeps its row with ``invalid_at`` set, so the
    history of every key can be read back. ``scope`` is user-level (thread_id None) for entities,
    relations and state, a thread for summaries.
    """

    id: str
    scope: Scope
    kind: str
    key: str
    value: Mapping[str, Any]
    source_ids: tuple[str, ...] = ()
    #: when the fact became true: the time of the message it came from, never the clock's
    valid_from: datetime | None = None
    #: when it stopped being current (superseded or deleted); None while current
    invalid_at: datetime | None = None
    created_at: datetime = field(default_factory=utcnow)
    version: int = 1

    def __post_init__(self) -> None:
        if self.kind not in RECORD_KINDS:
            raise InvalidInput(f"unknown record kind {self.kind!r}; expected one of {', '.join(RECORD_KINDS)}", field="kind")
        if not isinstance(self.key, str) or not self.key:
            raise InvalidInput("a record needs a non-empty key", field="key")
        if isinstance(self.source_ids, list):
            object.__setattr__(self, "source_ids", tuple(self.source_ids))

    @property
    def current(self) -> bool:
        return self.invalid_at is None


@dataclass(frozen=True, slots=True)
class Change:
    """One write to a RecordStore: ``put`` adds a key or supersedes its current value (a put of the
    value already current is a no-op, so a rerun job writes nothing twice); ``delete`` invalidates
    the current record. ``at`` is when it became true (the source messages' time)."""

    action: str
    kind: str
    key: str
    value: Mapping[str, Any] | None = None
    source_ids: tuple[str, ...] = ()
    at: datetime | None = None

    def __post_init__(self) -> None:
        if self.action not in ("put", "delete"):
            raise InvalidInput(f"unknown change action {self.action!r}; expected put or delete", field="action")
        if self.kind not in RECORD_KINDS:
            raise InvalidInput(f"unknown record kind {self.kind!r}; expected one of {', '.join(RECORD_KINDS)}", field="kind")
        if self.action == "put" and not isinstance(self.value, Mapping):
            raise InvalidInput("a put needs a value (a JSON object)", field="value")
        if not isinstance(self.key, str) or not self.key:
            raise InvalidInput("a change needs a non-empty key", field="key")
        check_text(self.key, "key", what="the key")
        if self.action == "put":  # a delete names what is stored, whatever older versions let in
            if self.kind == "state":
                check_state_key(self.key)
            # a state value is stored as {"value": ...}: the wrapper is not the writer's depth
            check_json(self.value, "value", max_depth=MAX_JSON_DEPTH + (self.kind == "state"))
        if isinstance(self.source_ids, list):
            object.__setattr__(self, "source_ids", tuple(self.source_ids))


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """What a Change did: ``add``, ``supersede`` or ``delete`` of a key, with before/after values,
    the source messages, the layer that made it and when it was recorded."""

    id: str
    scope: Scope
    layer: str
    kind: str
    key: str
    action: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    source_ids: tuple[str, ...]
    at: datetime


#: what a deletion note says was forgotten: a whole user, one thread, one saved memory (a note),
#: or what a retention pass found older than the tenant's policy kept (``expired``, ``Store.expire``)
DELETION_KINDS: tuple[str, ...] = ("user", "thread", "note", "expired")


@dataclass(frozen=True, slots=True)
class Deletion:
    """The note a deletion leaves in its store (``Store.deletions``), which outlives what it
    deleted: what was forgotten (``kind``), how much of it (``rows`` in all, ``counts`` by what they
    were: ``backends.deletions.COUNTED``), when, and by whom (``layer``, as the audit trail names
    its writers: "ui", "api", "cli", "tool", "library"; None in notes from before it was kept).

    It holds no content and no id: ``user_hash`` is a keyed hash of the user id, ``target_hash``
    one of the thread or saved memory (None for a user), under the store's own secret
    (``backends.deletions``), so the store can still answer "was this forgotten?"."""

    tenant: str
    kind: str
    user_hash: str
    target_hash: str | None
    at: datetime
    rows: int
    counts: Mapping[str, int]
    layer: str | None


@dataclass(frozen=True, slots=True)
class Expiry:
    """What one retention pass deletes of a tenant (``Store.expire``): messages dated before
    ``messages``, audit events recorded before ``audit``, model calls made before ``usage`` (None:
    none of that kind), and (``derived``) the model-made memories (records, retrieval units and
    their vectors) whose source messages were all among the expired ones or already gone. A
    memory without source messages (a saved memory) is never derived."""

    messages: datetime | None = None
    audit: datetime | None = None
    usage: datetime | None = None
    derived: bool = True

    def __post_init__(self) -> None:
        for name in ("messages", "audit", "usage"):
            value = getattr(self, name)
            if value is not None:
                aware(value, field_name=name)


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One model call made for a scope: which layer, which model, its tokens and latency, whether
    its output was usable (``error`` says why not)."""

    scope: Scope
    layer: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    ok: bool = True
    error: str | None = None
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """The model calls of one user and layer over a time range (``UsageLog.totals``): how many,
    and their tokens."""

    user_id: str
    layer: str
    calls: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Restricts a search within one user's memories: threads, categories, kinds, a time range
    (``since`` <= timestamp < ``until``). Empty fields do not restrict."""

    thread_ids: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("thread_ids", "categories", "kinds"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, (value,))
            elif not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        if self.since is not None:
            aware(self.since, field_name="since")
        if self.until is not None:
            aware(self.until, field_name="until")

    def matches(self, unit: Unit) -> bool:
        """The same predicate the indexes apply, for in-process filtering and tests."""
        return (
            (not self.thread_ids or unit.scope.thread_id in self.thread_ids)
            and (not self.categories or unit.category in self.categories)
            and (not self.kinds or unit.kind in self.kinds)
            and (self.since is None or unit.timestamp >= self.since)
            and (self.until is None or unit.timestamp < self.until)
        )


@dataclass(frozen=True, slots=True)
class Scored:
    """A unit id with a score in [0, 1], higher is more relevant; what indexes return."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class IndexSwitch:
    """What a reindex into a new vector collection did (``Rebuildable.switch``): the collection
    searched now (None: the index is empty), the one it replaced (kept, no longer searched), and
    the older generations memstack made for the index that were dropped."""

    serving: str | None
    previous: str | None = None
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved unit with its fused score and how each retriever ranked it (1-based)."""

    unit: Unit
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


def scope_of(user_id: str, thread_id: str | None = None, *, tenant: str = "default", agent_id: str | None = None) -> Scope:
    """Shorthand for Scope(...) with keyword arguments in the order people think of them."""
    return Scope(user_id=user_id, thread_id=thread_id, tenant=tenant, agent_id=agent_id)


def messages_from(values: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    return [as_message(v) for v in values]
