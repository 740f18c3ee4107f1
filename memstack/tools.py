"""Tool-based memory (the articles' save_memory / recall_memory): a user's memory as plain typed
functions that a model calls itself, bound to a Memory and one user.

    tools = MemoryTools(memory, user_id="u1", thread_id="s1")
    tools.save_memory("我的后端使用SpringBoot", category="tech")
    tools.recall_memory("我的后端用什么？")
    tools.openai_tools()                        # OpenAI function-calling schemas
    tools.call("recall_memory", '{"query": "后端"}')   # dispatch for a model: always a string back
    tools.langchain_tools()                     # the same tools as LangChain StructuredTools

    kv = KeyValueTools(memory, user_id="u1")    # the articles' key/value form, same tool names
    kv.save_memory("city", "杭州")
    kv.recall_memory("city")                    # -> "杭州"

The functions are the one source of truth: their signatures (``Annotated`` with pydantic ``Field``
descriptions) and the first paragraph of their docstrings become the OpenAI tool schemas, the
argument models of the JSON-action chat loop (``memstack.tool_chat``) and the MCP server's tools
(``memstack.mcp_server``); nothing is declared twice.

A saved memory is a retrieval unit of kind "note", written and embedded at once (no job queue), so
``recall_memory`` finds it in the same turn and in every later session. Notes live in the user's
thread ``NOTES_THREAD`` (the thread they were saved in is kept in their metadata), so deleting a
conversation does not delete what the user asked to remember; deleting the user does. ``memstack
export`` carries them (records of type "note", see ``memstack.saved``), ``import`` re-indexes them,
``memstack reindex`` re-embeds them.

The key/value form (``KeyValueTools``, ``FORMS["key-value"]``) is the articles' ``@Tool
save_memory(key, value)`` / ``recall_memory(key)``: put and exact get by key. Its memories are
notes too (text "key: value", id from the key), so the note form's ``recall_memory(query)`` finds
them, and the MCP server and the REST tools API serve either form from these same functions.
Everything is scoped to the bound tenant and user: no function can read or delete another user's data.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .backends.rules.json_values import json_copy
from .errors import InvalidInput, MemstackError, UnknownName, UsageError, require
from .layers.state import state_value
from .retrieval.units import language
from .saved import KEY_PREFIX, NOTE_PREFIX, NOTES_THREAD, index_notes, key_id, note_id
from .types import MAX_STATE_KEY_CHARS, Change, Hit, Scope, Unit, check_json, check_state_key, utcnow

if TYPE_CHECKING:
    from .memory import Memory

log = logging.getLogger("memstack.tools")

__all__ = ["FORMS", "KEY_PREFIX", "NOTES_THREAD", "NOTE_PREFIX", "KeyValueTools", "MemoryTools", "ToolSpec", "memory_tools", "tool_spec"]

MAX_KEY_CHARS = MAX_STATE_KEY_CHARS
MAX_CATEGORY_CHARS = 64
MAX_RECALL = 20
#: how much of a model's bad arguments an error message repeats
ECHO_CHARS = 200


@dataclass(frozen=True)
class ToolSpec:
    """One tool as derived from its function: name, model-facing description, the evaluated
    signature, and a pydantic model of its arguments (extra keys forbidden)."""

    name: str
    description: str
    function: Callable[..., str]
    signature: inspect.Signature
    arguments: type[BaseModel]

    def openai(self) -> dict[str, Any]:
        """The OpenAI function-calling tool (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters_schema(self.arguments)},
        }


def tool_spec(function: Callable[..., str]) -> ToolSpec:
    """Derive a ToolSpec from a (bound) function: its name, its docstring's first paragraph, and
    an argument model built from its parameters' annotations and defaults.

    ``KeyValueTools`` overrides ``save_memory`` and ``recall_memory`` with the key/value form: the
    spec is derived from whichever function the instance has."""
    signature = inspect.signature(function, eval_str=True)
    fields: dict[str, Any] = {
        p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default) for p in signature.parameters.values()
    }
    name = function.__name__
    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    doc = inspect.getdoc(function) or ""
    description = " ".join(doc.split("\n\n", 1)[0].split())
    return ToolSpec(name, description, function, signature, model)


def parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema without pydantic's ``title`` noise (what a model reads)."""
    return _without_titles(model.model_json_schema())


def _without_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_titles(v) for v in node]
    return node


class MemoryTools:
    """The memory tools of one user (and optionally one agent), bound to a Memory.

    ``thread_id`` is the conversation the tools are used in: recorded with each saved memory,
    never a limit on what is recalled (recall spans all the user's threads). ``clock`` dates
    saved memories and state changes (default: now).
    """

    #: the tools a model sees, in this order
    NAMES: tuple[str, ...] = ("save_memory", "recall_memory", "forget_memory", "get_state", "set_state")

    def __init__(
        self,
        memory: Memory,
        user_id: str,
        thread_id: str | None = None,
        *,
        tenant: str | None = None,
        agent_id: str | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.memory = memory
        self.scope: Scope = memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        self.clock = clock
        self._specs: dict[str, ToolSpec] | None = None

    # ---- the tools -------------------------------------------------------------------------

    def save_memory(
        self,
        content: Annotated[str, Field(description="the fact to remember, one sentence in the user's own words and language")],
        category: Annotated[str | None, Field(description="an optional label, e.g. preference, project, health")] = None,
    ) -> str:
        """Save one fact, preference or decision about the user to long-term memory, so that it can be recalled in any later conversation.

        Saving the same text again updates its date and category instead of adding a copy (the id
        is derived from the text).
        """
        text = self._note_text(content)
        label = _category(category)
        scope = self.scope.thread(NOTES_THREAD)
        unit = Unit(
            id=note_id(text),
            scope=scope,
            text=text,
            timestamp=self.clock(),
            kind="note",
            category=label,
            metadata={"lang": language(text), "saved_in": self.scope.thread_id, "via": "tool"},
        )
        self._index(unit)
        return f"saved memory {unit.id}" + (f" ({label})" if label else "") + f": {text}"

    def recall_memory(
        self,
        query: Annotated[str, Field(description="what to look for, e.g. the user's question")],
        k: Annotated[int, Field(ge=1, le=MAX_RECALL, description="how many memories at most")] = 5,
    ) -> str:
        """Search the user's long-term memory (saved memories and earlier conversations) for what is relevant to a query; returns the best matches, each with its date and id.

        Hybrid search (BM25 and dense) over every thread of the user, with the relevance floor of
        ``Memory.search``: an unrelated query finds nothing rather than noise.
        """
        if not query.strip():
            raise InvalidInput("query is empty", field="query")
        hits = self.memory.search(
            query, user_id=self.scope.user_id, tenant=self.scope.tenant, agent_id=self.scope.agent_id, k=k, at=self.clock()
        )
        waiting = self.memory.pending(user_id=self.scope.user_id, tenant=self.scope.tenant)
        note = f"\n({waiting} of this user's memory jobs have not run yet: the newest messages may not be found)" if waiting else ""
        return render_recall(hits) + note

    def forget_memory(
        self,
        memory_id: Annotated[str, Field(description="the id of a saved memory, as save_memory or recall_memory showed it")],
    ) -> str:
        """Delete one saved memory by its id.

        Only saved memories (ids starting with "note-", key/value memories included) can be forgotten here; a conversation is
        deleted with ``Memory.forget``. The lookup is scoped to this user, so another user's id is
        simply not found.
        """
        s = self.scope
        gone = self.memory.forget_saved(memory_id, user_id=s.user_id, tenant=s.tenant, agent_id=s.agent_id, by="tools")
        return f"forgot memory {memory_id}: {gone.text}"

    def get_state(
        self,
        key: Annotated[str | None, Field(description="one key to read; omit it to read the whole state")] = None,
    ) -> str:
        """Read the user's current state (JSON): one key's value, or every key as one JSON object.

        The state is the user-level record set that the ``state`` layer keeps and that set_state
        writes; a missing key reads as null.
        """
        state = {r.key: state_value(r) for r in self._records().current(self.scope.user(), "state")}
        value = state if key is None else state.get(key)
        return json.dumps(value, ensure_ascii=False)

    def set_state(
        self,
        key: Annotated[str, Field(description="the state key, e.g. current_task")],
        value: Annotated[Any, Field(description="any JSON value; null deletes the key")],
    ) -> str:
        """Set one key of the user's state to a JSON value (null deletes the key); every change is kept in the audit trail.

        A change supersedes the old value, which stays in the key's history (``memstack audit``
        shows it with layer "tools").
        """
        key = _state_key(key)
        check_json(value, "value")  # first: json_copy would recurse out of a value nested 1000 deep
        stored = json_copy({"value": value})
        change = Change("delete", "state", key, at=self.clock()) if value is None else Change("put", "state", key, stored, (), self.clock())
        events = self._records().apply(self.scope.user(), [change], layer="tools")
        if value is None:
            return f"deleted state key {key}" if events else f"state key {key} was not set"
        return f"state {key} = {json.dumps(stored['value'], ensure_ascii=False)}" + ("" if events else " (unchanged)")

    # ---- derived artefacts -----------------------------------------------------------------

    def specs(self) -> dict[str, ToolSpec]:
        """Every tool's spec by name, derived once from the bound functions."""
        if self._specs is None:
            self._specs = {name: tool_spec(getattr(self, name)) for name in self.NAMES}
        return self._specs

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools as OpenAI function-calling schemas (``tools=`` of a chat completion)."""
        return [spec.openai() for spec in self.specs().values()]

    def langchain_tools(self) -> list[Any]:
        """The tools as LangChain ``StructuredTool`` objects (``pip install "memstack[langchain]"``),
        for ``model.bind_tools(...)``, ``ToolNode`` or an agent: the same names, descriptions and
        argument schemas as ``openai_tools``. Each runs through ``call``, so a model's mistake comes
        back to it as an "error: ..." result (the tool's output), never as an exception in the graph."""
        tools_module = require("langchain_core.tools", extra="langchain", package="langchain-core")
        # the schema goes to LangChain as JSON (exactly what openai_tools says; from a pydantic
        # class LangChain drops "additionalProperties"), so LangChain passes the model's arguments
        # as they are and ``call`` validates them, as for every other door
        return [
            tools_module.StructuredTool(
                name=spec.name, description=spec.description, args_schema=parameters_schema(spec.arguments), func=self._runner(spec.name)
            )
            for spec in self.specs().values()
        ]

    def _runner(self, name: str) -> Callable[..., str]:
        def run(**arguments: Any) -> str:
            return self.call(name, arguments)

        return run

    def call(self, name: str, arguments: str | Mapping[str, Any] | None = None) -> str:
        """Run the tool ``name`` with ``arguments`` (a JSON object as text or a mapping) and return
        its result as text for the model.

        A mistake of the model (unknown tool, arguments that are not a JSON object or do not fit
        the tool) or of the call (InvalidInput, ...) comes back as a string starting with
        "error: ", never as an exception: the model reads it and can try again. A failing store
        also comes back as an error string (and is logged); bugs propagate.
        """
        spec = self.specs().get(name)
        if spec is None:
            return f"error: unknown tool {name!r}; available: {', '.join(self.NAMES)}"
        try:
            parsed = _arguments_object(arguments)
            values = spec.arguments.model_validate(parsed)
        except (InvalidInput, ValidationError) as exc:
            return f"error: invalid arguments for {name}: {_explain(exc)}"
        try:
            return spec.function(**{k: getattr(values, k) for k in spec.signature.parameters})
        except UsageError as exc:
            return f"error: {exc}"
        except MemstackError as exc:
            log.warning("tool %s failed for user %s: %s", name, self.scope.user_id, exc)
            return f"error: {name} failed ({exc.code}): {exc}"

    # ---- helpers ---------------------------------------------------------------------------

    def _note_text(self, content: str) -> str:
        text = content.strip() if isinstance(content, str) else ""
        if not text:
            raise InvalidInput("content is empty", field="content")
        if "\x00" in text:
            raise InvalidInput("content contains a NUL character", field="content")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"content is not valid UTF-8 text (at character {exc.start})", field="content") from exc
        if size > self.memory.max_message_bytes:
            raise InvalidInput(f"content is {size} bytes, over the limit of {self.memory.max_message_bytes}", field="content")
        return text

    def _retrieval(self) -> Any:
        # the Memory's own retrieval layer: the embedder and vector index that Memory.search uses
        return self.memory._layer("retrieval", {})

    def _index(self, unit: Unit) -> None:
        """Store and index the note: searchable by keyword and by meaning as soon as this returns."""
        index_notes(self._retrieval(), self.memory.store, [unit])

    def _records(self) -> Any:
        records = getattr(self.memory.store, "records", None)
        if records is None:
            raise UsageError(f"the {type(self.memory.store).__name__} backend keeps no state records; use sqlite, postgresql or memory")
        return records


class KeyValueTools(MemoryTools):
    """The articles' key/value form of the tools: ``save_memory(key, value)`` puts a value under a
    key, ``recall_memory(key)`` gets it back exactly (the Java ``@Tool`` example:
    ``externalDB.put(key, value)`` / ``externalDB.get(key)``). The tool names are the same as the
    note form's, so a model (or an article's code) sees the names it expects; forget_memory,
    get_state and set_state are the note form's. A key/value memory is a note whose text is
    "key: value" (so a search by meaning finds it too) and whose id is derived from the key.
    """

    def save_memory(  # type: ignore[override]
        self,
        key: Annotated[str, Field(description="a short name for the information, e.g. favourite_food or 项目名称")],
        value: Annotated[str, Field(description="the information to remember under that key, in the user's own words and language")],
    ) -> str:
        """Save one important piece of information to long-term memory under a key; saving a key again replaces its value.

        The value is recalled exactly by its key (recall_memory), in any later conversation.
        """
        name = _memory_key(key)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput("value is empty", field="value")
        text = self._note_text(f"{name}: {value.strip()}")
        unit = Unit(
            id=key_id(name),
            scope=self.scope.thread(NOTES_THREAD),
            text=text,
            timestamp=self.clock(),
            kind="note",
            metadata={"lang": language(text), "saved_in": self.scope.thread_id, "via": "tool", "key": name, "value": value.strip()},
        )
        self._index(unit)
        return f"saved memory {unit.id} under key {name!r}: {value.strip()}"

    def recall_memory(  # type: ignore[override]
        self,
        key: Annotated[str, Field(description="the key the information was saved under")],
    ) -> str:
        """Recall the information saved earlier under a key; returns the saved value itself.

        An exact lookup in this user's key/value memories; a key never saved says so (search by
        meaning is the note form's recall_memory(query)).
        """
        name = _memory_key(key)
        found = (
            self.memory.store.units.get(self.scope.user(), [key_id(name)]) if getattr(self.memory.store, "units", None) is not None else []
        )
        if not found:
            return f"no memory saved under key {name!r}"
        return str(found[0].metadata.get("value", found[0].text))


#: the tool forms by name: what ``memstack mcp --tools`` and the REST tools API's ``form`` choose
FORMS: dict[str, type[MemoryTools]] = {"notes": MemoryTools, "key-value": KeyValueTools}


def memory_tools(memory: Memory, user_id: str, thread_id: str | None = None, *, form: str = "notes", **options: Any) -> MemoryTools:
    """The tools of ``form`` ("notes" or "key-value") bound to a user; UnknownName for another form."""
    cls = FORMS.get(form)
    if cls is None:
        raise UnknownName(f"unknown tool form {form!r}; expected one of {', '.join(FORMS)}")
    return cls(memory, user_id, thread_id, **options)


def render_recall(hits: list[Hit]) -> str:
    """Recalled units for a model, best first: one line each with date, id, origin and text."""
    if not hits:
        return "no relevant memories found"
    lines = [f"{len(hits)} relevant memories (best first):"]
    for h in hits:
        u = h.unit
        origin = f"saved memory{', ' + u.category if u.category else ''}" if u.kind == "note" else f"conversation {u.scope.thread_id}"
        text = " / ".join(line.strip() for line in u.text.splitlines() if line.strip())
        lines.append(f"- [{u.timestamp.date().isoformat()}] {u.id} ({origin}): {text}")
    return "\n".join(lines)


def _category(category: str | None) -> str | None:
    if category is None or not category.strip():
        return None
    label = category.strip()
    if len(label) > MAX_CATEGORY_CHARS or any(ord(c) < 32 for c in label):
        raise InvalidInput(f"category must be at most {MAX_CATEGORY_CHARS} characters without control characters", field="category")
    return label


def _memory_key(key: str) -> str:
    name = key.strip() if isinstance(key, str) else ""
    if not name:
        raise InvalidInput("key is empty", field="key")
    if len(name) > MAX_KEY_CHARS or any(ord(c) < 32 for c in name):
        raise InvalidInput(f"key must be at most {MAX_KEY_CHARS} characters without control characters", field="key")
    return name


def _state_key(key: str) -> str:
    """The key as the model wrote it, less surrounding spaces, under the library's one rule."""
    return check_state_key(key.strip() if isinstance(key, str) else key)


def _arguments_object(arguments: str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The arguments as a mapping: None and "" are {}; text must hold one JSON object."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return arguments
    if not isinstance(arguments, str):
        raise InvalidInput(f"arguments must be a JSON object, got {type(arguments).__name__}")
    if not arguments.strip():
        return {}
    try:
        data = json.loads(arguments)
    except ValueError as exc:
        raise InvalidInput(f"not valid JSON ({exc}): {arguments[:ECHO_CHARS]!r}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"arguments must be a JSON object, got {type(data).__name__}")
    return data


def _explain(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in errors[:3])
    return str(exc)
