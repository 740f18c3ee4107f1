"""Memory: a history store, a stack of layers and a token budget -> add() and context().

``add()`` validates everything first, then stores the messages and enqueues the layers' write-side
work in one transaction, and returns: slow work (embedding, model calls) runs later from the
durable job queue, drained by ``flush()``, a background worker thread, or ``memstack worker``.
``context()`` runs the layers' cheap read sides and fits the result into ``max_tokens`` exactly
under the chosen token counter, reporting what each part costs and what was dropped and why.

The budget: a layer's ``share`` is a cap on its sections, not a reservation. The conversation the
layers keep gets what it needs first; the memory sections get the rest of ``max_tokens`` (never
less than ``SECTIONS_SHARE`` of what the system messages and the query leave: a longer
conversation is trimmed instead). What the layers leave of that room unused goes, in a second
pass, to the layers that hit their cap, retrieval first: each is read again, on the same
conversation, with the leftover added to its cap (the retrieval's hits are searched once per
call and only fitted again).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel

from . import expiry, saved
from . import layers as layer_registry
from .backends import open_store, open_vectors
from .backends.rules.json_values import json_copy
from .budget import pack, trim
from .ceiling import Ceiling
from .costs import Budget
from .errors import BudgetError, InvalidInput, UsageError
from .jobs import IDLE_SECONDS, JobRunner
from .jobs import JobReport as JobReport
from .layers.base import Layer, LayerOutput, ReadRequest, Writer
from .llm.base import ChatModel
from .profile import REFUSAL, Profile, ProfileMismatch, default_layers, mismatch, stored_options, vectors_mismatch
from .replaced import check_replaced, visible, visible_tail
from .retention import Retention
from .stack import Run, memory_room, pipeline, refill
from .stores import ANY, RecordStore, Store, UnitStore, VectorIndex, records_of, usage_of
from .tokens import TokenCounter, get_counter
from .types import (
    MAX_LAST,
    AuditEvent,
    Context,
    Dropped,
    Hit,
    Message,
    Record,
    Scope,
    SearchFilter,
    Section,
    ThreadInfo,
    Unit,
    UsageRecord,
    check_message,
    in_range,
    utcnow,
)

if TYPE_CHECKING:
    from .layers.retrieval import Retrieval

log = logging.getLogger("memstack")

DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
_TAIL_START = 256
#: a process looks up a tenant's retention pass at most this often (``Memory.retention_pass``)
LOOK_SECONDS = 60.0

MessageLike = Message | Mapping[str, Any] | str
_UNSET: Any = object()
T = TypeVar("T", bound=BaseModel)


class Memory:
    """Per-user conversation memory over one store.

    ``store``: a Store, a URL (``sqlite:///file.db``, ``postgresql://...``, ``memory://``) or None
    for the SQLite file under MEMSTACK_HOME. The store's memory profile for ``tenant``
    (``memstack.profile``) says which layers get a job after every ``add``: written from
    ``layers``/``preset`` (else ``window,retrieval``) when the store has none, followed after.
    ``layers``: the default stack ``context`` reads with (names or a comma-separated string); one
    whose write side the profile lacks is refused (``ProfileMismatch``).
    ``options`` configure layers by parameter name (``{"k": 4}`` sets the window's k; a dotted
    name ``{"retrieval.share": 0.3}`` one layer only). ``preset``: one of the articles' scenario
    stacks by name (``memstack.presets.PRESETS``), instead of ``layers``.
    ``vectors``: the retrieval layers' vector index outside the store, a VectorIndex or a URL
    (``milvus://host:19530``, ``milvus:///abs/file.db``, ``chroma://host:8000``, ``chroma:///abs/dir``;
    ``backends.open_vectors``), None for the store's own. The profile records where the vectors
    are: a process naming another place (or none, for a store whose vectors are in Milvus or
    Chroma) is refused (``ProfileMismatch``).
    ``entity_schema``: the developer's pydantic model of entities (the articles' ``EntityExtraction``:
    a list of models with a ``name``), which the entity and graph layers' extraction asks for
    instead of memstack's own (``memstack.llm.custom``); pass it in every process that runs the
    jobs. ``state_schema``: the state's keys, a pydantic model (or a JSON schema object), kept in
    the store's profile. ``extract()`` runs one extraction in any schema, outside the layers.
    ``ceiling``: the cost ceilings the write queue keeps (``memstack.ceiling``; tests pass one with
    their own clock), else one on the real clock.
    ``idle_seconds``: a thread quiet this long (its last turn that old) has the turns its
    model-backed layers held back for a fuller batch run by the worker as at a flush, so a short
    session reaches the summary and the profile without one; None: only ``flush()`` does.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        layers: Sequence[str] | str | None = None,
        max_tokens: int | None = 4000,
        counter: str | TokenCounter | None = None,
        tenant: str = "default",
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        options: Mapping[str, Any] | None = None,
        lease_seconds: float = 300.0,
        background: bool = False,
        preset: str | None = None,
        vectors: VectorIndex | str | None = None,
        entity_schema: type[BaseModel] | None = None,
        state_schema: type[BaseModel] | Mapping[str, Any] | None = None,
        ceiling: Ceiling | None = None,
        idle_seconds: float | None = IDLE_SECONDS,
    ) -> None:
        options = _with_schemas(options, entity_schema, state_schema)
        self.store: Store = store if store is not None and not isinstance(store, (str, os.PathLike)) else open_store(store)
        #: the vector index outside the store (None: the store's own); closed with the Memory when opened from a URL
        self.vectors: VectorIndex | None = open_vectors(vectors) if isinstance(vectors, str) else vectors
        self._owns_vectors = isinstance(vectors, str)
        if preset is not None and layers is not None:
            raise InvalidInput("give a preset or layers, not both", field="preset")
        if preset is not None:  # the scenario's layers and options; explicit options win
            from .presets import preset_named

            chosen = preset_named(preset)
            layers, options = chosen.layers, {**chosen.options, **(options or {})}
        given = None if layers is None else layer_registry.parse_stack(layers) if isinstance(layers, str) else list(layers)
        self.max_tokens = max_tokens
        self.tenant = tenant
        self.max_message_bytes = max_message_bytes
        self.options = dict(options or {})
        self.lease_seconds = lease_seconds
        self._built: dict[tuple[str, tuple[tuple[str, str], ...]], Layer] = {}
        #: the write queue's runner and background worker (``memstack.jobs``)
        self._jobs = JobRunner(
            self.store, lambda name: self._layer(name, {}), lease_seconds, ceiling, maintain=self.retention_pass, idle_seconds=idle_seconds
        )
        #: the tenants' cost ceilings over this store (``memstack.ceiling``): ``ceiling.spends(tenant)``, ``ceiling.waiting(tenant)``
        self.ceiling = self._jobs.ceiling
        #: the worker's retention pass (``retention_pass``): how often per tenant, and when this process last looked
        self.retention_every = expiry.EVERY
        self._retention_looked: dict[str, float] = {}
        #: tenants the retention pass covers besides this Memory's and those it wrote for (the service's API keys')
        self.retention_tenants: set[str] = set()
        self._profiled: set[str] = set()
        try:
            Scope(user_id="probe", tenant=tenant)  # validates the tenant
            self.counter = get_counter(counter)
            self.profile = self._settle_profile(given, preset, counter)
            if counter is None and self.profile.counter:
                self.counter = get_counter(self.profile.counter)
            #: the stack ``context`` reads with by default; the write side is the profile's
            self.layers = given if given is not None else list(self.profile.layers)
            self.write_layers = list(self.profile.layers)
            self._writers()  # builds every layer and shared job now: a bad option fails here, not in a job
        except BaseException:
            if self._owns_vectors and self.vectors is not None:
                self.vectors.close()  # type: ignore[attr-defined]  # a refused process leaves no connection behind
            raise
        if background:
            self.start_worker()

    def _settle_profile(self, given: list[str] | None, preset: str | None, counter: str | TokenCounter | None) -> Profile:
        """The tenant's stored profile (written from this process's stack, else the default,
        when the store has none), with this process's options laid over its stored ones; a
        process that would write with more layers or another embedder is refused."""
        profiles = getattr(self.store, "profiles", None)
        mine = Profile(
            tuple(given) if given is not None else default_layers(self.store),
            preset if given is not None else None,
            stored_options(self.options),
            counter if isinstance(counter, str) else None,
            vectors_location(self.vectors, self.store),
        )
        if profiles is None:  # a third-party store without profiles: this process decides alone
            return mine
        raw = profiles.get(self.tenant)
        if raw is None:
            raw = profiles.put(self.tenant, mine.to_dict())
        stored = Profile.from_dict(raw)
        where = vectors_mismatch(stored, mine.vectors)
        if where:
            raise ProfileMismatch(where)
        self._profiled.add(self.tenant)
        explicit = dict(self.options)
        self.options = {**stored.options, **explicit}
        if given is not None or "embedder" in explicit:
            stack = given if given is not None else list(stored.layers)
            reason = mismatch(stored, stack, self._writers_of(stack), self._writers_of(stored.layers), explicit)
            if reason:
                raise ProfileMismatch(reason + REFUSAL)
        return stored

    def _check_tenant(self, tenant: str) -> None:
        """A write for another tenant than this Memory's: that tenant's profile must queue the
        same jobs (written from this one's when it has none)."""
        if self._tenant_checked(tenant):
            return
        profiles = self.store.profiles  # there: a store without profiles needs no check
        raw = profiles.get(tenant) or profiles.put(tenant, self.profile.to_dict())
        theirs = Profile.from_dict(raw)
        if self._writers_of(theirs.layers) != self._writers() or theirs.embedder() != self.profile.embedder():
            raise ProfileMismatch(
                f"tenant {tenant!r} is configured for {theirs.describe()}, this process for {self.profile.describe()}" + REFUSAL
            )
        where = vectors_mismatch(theirs, self.profile.vectors)
        if where:
            raise ProfileMismatch(f"tenant {tenant!r}: {where}")
        self._profiled.add(tenant)

    # ---- scopes and layers -----------------------------------------------------------------

    def scope(self, user_id: str, thread_id: str | None = None, *, tenant: str | None = None, agent_id: str | None = None) -> Scope:
        return Scope(user_id=user_id, thread_id=thread_id, tenant=tenant or self.tenant, agent_id=agent_id)

    def _layer(self, name: str, options: Mapping[str, Any], stack: Sequence[str] | None = None) -> Layer:
        # a job name may carry its configuration after a colon ("extract:facts,entities"), so any
        # worker process runs it the same way
        name, _, variant = name.partition(":")
        given = {**self.options, **{k: v for k, v in options.items() if v is not None}}
        # "retrieval.share": an option for one layer only; plain names go to every layer
        shared = {k: v for k, v in given.items() if "." not in k}
        own = {k.split(".", 1)[1]: v for k, v in given.items() if k.startswith(name + ".")}
        layers = tuple(stack) if stack is not None else tuple(getattr(self, "write_layers", ()))
        merged = {
            "store": self.store,
            "counter": self.counter,
            "stack": layers,
            "vectors": self.vectors,
            **shared,
            **own,
            **({"variant": variant} if variant else {}),
        }
        key = (name, tuple(sorted((k, repr(v)) for k, v in merged.items())))
        if key not in self._built:
            self._built[key] = layer_registry.build_layer(name, **merged)
        return self._built[key]

    def _retrieval(self, options: Mapping[str, Any]) -> Retrieval:
        """The retrieval layer (the registry's "retrieval" is ``layers.retrieval.Retrieval``)."""
        return cast("Retrieval", self._layer("retrieval", options))

    def _writers(self) -> list[str]:
        """The job names to enqueue after an add: those of the profile's layers."""
        return self._writers_of(self.write_layers)

    def _writers_of(self, stack: Sequence[str]) -> list[str]:
        """The job names a stack queues: each writing layer's own, or the shared job a layer
        names (the model-backed layers share one extraction job per thread)."""
        names: list[str] = []
        for name in stack:
            layer = self._layer(name, {}, stack)
            job = getattr(layer, "job", None)
            if job:
                job = getattr(self._layer(job, {}, stack), "job_name", job)
            elif isinstance(layer, Writer):
                job = name
            if job and job not in names:
                names.append(job)
        return names

    @classmethod
    def configure(
        cls,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        layers: Sequence[str] | str | None = None,
        preset: str | None = None,
        options: Mapping[str, Any] | None = None,
        counter: str | None = None,
        tenant: str = "default",
        reconfigure: bool = False,
        vectors: VectorIndex | str | None = None,
        retention: Retention | str | None = None,
        budget: Budget | None = None,
    ) -> tuple[Profile, int]:
        """Write the tenant's memory profile (``memstack init``): the stack (a preset or layers,
        default ``DEFAULT_LAYERS``), layer options (``model``, ``embedder`` as provider strings),
        the token counter. A store that has a different profile is refused unless
        ``reconfigure``: then the new profile replaces it and every thread gets the jobs of the
        new write side (a new layer reads each thread from its start). ``vectors``: where the
        vectors are kept (see ``Memory``); a reconfiguration that changes it, or the embedder,
        embeds every unit into the index (Milvus: a new collection, switched to when full).
        ``retention``: how long memory is kept (``memstack.retention``; a policy or its text,
        ``"messages=180d,audit=365d"``; None keeps everything).
        ``budget``: the tenant's cost ceilings (``memstack.costs``); given alone (no stack, options
        or counter) to a configured store, it replaces only the budget, queueing nothing.
        Returns the profile and the threads queued."""
        policy = Retention.parse(retention) if isinstance(retention, str) else retention or Retention()
        opened = store if store is not None and not isinstance(store, (str, os.PathLike)) else open_store(store)
        if preset is not None and layers is not None:
            raise InvalidInput("give a preset or layers, not both", field="preset")
        index = open_vectors(vectors) if isinstance(vectors, str) else vectors
        try:
            if (
                budget is not None
                and layers is None
                and preset is None
                and not options
                and counter is None
                and index is None
                and retention is None
            ):
                current = getattr(opened, "profiles", None) and opened.profiles.get(tenant)
                if current:  # `memstack init --budget ...` on a configured store: the budget only
                    changed = replace(Profile.from_dict(current), budget=budget)
                    return Profile.from_dict(opened.profiles.put(tenant, changed.to_dict(), replace=True)), 0
            return cls._configure(opened, index, layers, preset, options, counter, tenant, reconfigure, policy, budget)
        finally:
            if index is not None and isinstance(vectors, str):
                index.close()  # type: ignore[attr-defined]
            if opened is not store:
                opened.close()

    @classmethod
    def _configure(
        cls,
        opened: Store,
        index: VectorIndex | None,
        layers: Sequence[str] | str | None,
        preset: str | None,
        options: Mapping[str, Any] | None,
        counter: str | None,
        tenant: str,
        reconfigure: bool,
        retention: Retention | None = None,
        budget: Budget | None = None,
    ) -> tuple[Profile, int]:
        chosen_options = dict(options or {})
        if preset is not None:
            from .presets import preset_named

            chosen = preset_named(preset)
            layers, chosen_options = list(chosen.layers), {**chosen.options, **chosen_options}
        names = layer_registry.parse_stack(layers) if isinstance(layers, str) else list(layers or default_layers(opened))
        get_counter(counter)  # an unknown counter fails before anything is written
        wanted = Profile(
            tuple(names),
            preset,
            stored_options(chosen_options),
            counter,
            vectors_location(index, opened),
            retention or Retention(),
            budget or Budget(),
        )
        profiles = getattr(opened, "profiles", None)
        if profiles is None:
            raise InvalidInput(f"the {type(opened).__name__} store keeps no memory profile", field="store")
        current = profiles.get(tenant)
        if budget is None and current is not None:  # a budget stays until another is given
            wanted = replace(wanted, budget=Profile.from_dict(current).budget)
        if current is not None and Profile.from_dict(current) != Profile.from_dict(wanted.to_dict()) and not reconfigure:
            raise ProfileMismatch(
                f"the store is already configured for {_with_retention(Profile.from_dict(current))}; pass --reconfigure to replace it with {_with_retention(wanted)}"
            )
        if current is not None:
            before, after = Profile.from_dict(current), Profile.from_dict(wanted.to_dict())
            if (before.embedder() != after.embedder() or before.vectors != after.vectors) and getattr(opened, "vectors", None) is not None:
                from .layers.retrieval import reindex

                # vectors of two models do not compare, and vectors moved are embedded where they
                # go: before the profile names the new place, so a failure leaves the old one
                reindex(opened, after.options.get("embedder"), vectors=index)
        stored = Profile.from_dict(profiles.put(tenant, wanted.to_dict(), replace=True))
        queued = cls(opened, tenant=tenant, vectors=index).requeue() if current is not None else 0
        return stored, queued

    def requeue(self) -> int:
        """Request the profile's jobs for every thread of the tenant (after a reconfiguration: a
        new layer's job starts at the thread's first message; the others have nothing to do)."""
        writers = self._writers()
        if not writers:
            return 0
        n = 0
        for user_id in self.store.history.users(self.tenant):
            user = self.scope(user_id)
            for info in self.store.history.threads(user):
                scope = (
                    user.thread(info.thread_id)
                    if info.agent_id is None
                    else replace(user, thread_id=info.thread_id, agent_id=info.agent_id)
                )
                self.store.history.append(scope, [], enqueue=writers)
                n += 1
        return n

    def pending(self, *, user_id: str | None = None, tenant: str | None = None) -> int:
        """Jobs with work not yet done: the user's (every thread), or the whole store's."""
        return self.store.jobs.pending(self.scope(user_id, tenant=tenant) if user_id else None)

    # ---- writing ---------------------------------------------------------------------------

    def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        at: datetime | None = None,
        expect_last: int | None | object = ANY,
    ) -> list[Message]:
        """Store messages (Message objects, OpenAI-shaped dicts, or plain strings as user messages).

        ``at`` dates the dicts and strings that carry no timestamp (default: now). Everything is
        validated before anything is written; returns the stored messages (duplicates by id are
        skipped). The layers' write-side work is queued in the same transaction. ``expect_last``: only
        if the thread's last message is still that seq (None: the thread is empty), else
        ``Conflict`` and nothing is stored (see ``HistoryStore.append``).
        """
        scope = self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        self._check_tenant(scope.tenant)
        stored = self.store.history.append(scope, self._batch(messages, at), **self._append_options(expect_last))
        self._added()
        return stored

    # (add's steps around its one store call, shared with AsyncMemory's add)

    def _batch(self, messages: MessageLike | Iterable[MessageLike], at: datetime | None) -> list[Message]:
        """The messages to store, every one validated; InvalidInput before anything is written."""
        stamp = in_range(at, field_name="at") if at is not None else utcnow()
        batch = [self._validate(self._coerce(m, stamp)) for m in _as_list(messages)]
        if not batch:
            raise InvalidInput("no messages to add", field="messages")
        return batch

    def _append_options(self, expect_last: int | None | object) -> dict[str, Any]:
        """``HistoryStore.append``'s options for an add: the jobs to queue, the condition."""
        return {"enqueue": self._writers(), **({} if expect_last is ANY else {"expect_last": expect_last})}

    def _tenant_checked(self, tenant: str) -> bool:
        """Whether a write for ``tenant`` needs no check of its profile (``_check_tenant``, which reads the store)."""
        return tenant in self._profiled or getattr(self.store, "profiles", None) is None

    def _added(self) -> None:
        """After an add: wake the background worker."""
        self._jobs.wake()

    def _coerce(self, value: MessageLike, stamp: datetime) -> Message:
        if isinstance(value, Message):
            return value
        if isinstance(value, str):
            return Message(role="user", content=value, timestamp=stamp)
        if isinstance(value, Mapping):
            return Message.from_dict(value) if value.get("timestamp") else Message.from_dict(value, timestamp=stamp)
        raise InvalidInput(f"cannot make a message from {type(value).__name__}", field="messages")

    def _validate(self, message: Message) -> Message:
        raw = message.text + "".join(c.arguments for c in message.tool_calls)
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"message content is not valid UTF-8 text (at character {exc.start})", field="content") from exc
        if size > self.max_message_bytes:
            raise InvalidInput(f"message content is {size} bytes, over the limit of {self.max_message_bytes}", field="content")
        if "\x00" in raw:
            raise InvalidInput("message content contains a NUL character", field="content")
        check_message(message)
        if message.metadata:
            json_copy(message.metadata)
        return message

    # ---- reading ---------------------------------------------------------------------------

    def context(
        self,
        *,
        user_id: str,
        thread_id: str,
        query: str | None = None,
        at: datetime | None = None,
        strategy: str | Sequence[str] | None = None,
        max_tokens: int | None = _UNSET,
        counter: str | TokenCounter | None = None,
        tenant: str | None = None,
        agent_id: str | None = None,
        preset: str | None = None,
        **options: Any,
    ) -> Context:
        """The messages to send next: system messages, one system message of memory sections,
        the conversation as the layers shaped it, and ``query`` (the user's next message, not yet
        stored) last. Never more than ``max_tokens`` under ``counter``; only messages dated at or
        before ``at`` (default: now) are seen."""
        scope = self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        when = in_range(at, field_name="at") if at is not None else utcnow()
        tokens = get_counter(counter) if counter is not None else self.counter
        budget = self.max_tokens if max_tokens is _UNSET else max_tokens
        if budget is not None and budget < 0:
            raise InvalidInput("max_tokens must be >= 0", field="max_tokens")
        if preset is not None and strategy is not None:
            raise InvalidInput("give a preset or a strategy, not both", field="preset")
        if preset is not None:  # a scenario stack for this call (its writes need the same layers)
            from .presets import preset_named

            chosen = preset_named(preset)
            strategy, options = list(chosen.layers), {**chosen.options, **options}
        names = self.layers if strategy is None else layer_registry.parse_stack(strategy) if isinstance(strategy, str) else list(strategy)
        stack = [self._layer(n, options, self.layers) for n in names]
        query_msg = Message(role="user", content=query, timestamp=when) if query is not None and query.strip() else None
        if query_msg is not None:
            self._validate(query_msg)
        query_cost = tokens.count_message(query_msg) if query_msg else 0
        last_user = None if query_msg else self._last_user(scope, when)
        request = ReadRequest(
            scope,
            query if query_msg else (last_user.text if last_user else None),
            when,
            None if budget is None else max(0, budget - query_cost),
            tokens,
            frozenset([last_user.id]) if last_user else frozenset(),
        )
        out = self._run_stack(stack, request)
        return _assemble(out, query_msg, budget, tokens)

    def _last_user(self, scope: Scope, when: datetime) -> Message | None:
        found = self.store.history.read(scope, until=when, last=1, roles=("user",))
        return found[0] if found else None

    def _run_stack(self, stack: list[Layer], request: ReadRequest) -> LayerOutput:
        """The layers' output on the history they need, with the leftover of the budget given to
        the layers that hit their cap (``_refill``)."""
        return refill(self._first_pass(stack, request), request).output()

    def _first_pass(self, stack: list[Layer], request: ReadRequest) -> Run:
        need = {layer.history for layer in stack}
        if "all" in need:
            return pipeline(stack, request, self._visible(request.scope, until=request.at))
        if "tail" not in need:
            return pipeline(stack, request, [])
        n = _TAIL_START
        while True:
            raw = self.store.history.read(request.scope, until=request.at, last=n)
            loaded = visible(raw)
            if len(raw) < n:
                return pipeline(stack, request, loaded)
            run = pipeline(stack, request, self._with_earlier_system(request, loaded))
            if _tail_is_enough(loaded, run.messages):
                return run
            n *= 4

    def _visible(self, scope: Scope, **options: Any) -> list[Message]:
        """A thread's messages as its client sees them: without answers a regenerated one replaced."""
        return visible(self.store.history.read(scope, **options))

    def _with_earlier_system(self, request: ReadRequest, tail: list[Message]) -> list[Message]:
        """System messages stored before the tail, then the tail: instructions are never cut off."""
        first = tail[0].seq or 0
        earlier = [m for m in self.store.history.read(request.scope, until=request.at, roles=("system",)) if (m.seq or 0) < first]
        return earlier + tail

    def search(
        self,
        query: str,
        *,
        user_id: str,
        k: int | None = None,
        at: datetime | None = None,
        where: SearchFilter | None = None,
        tenant: str | None = None,
        agent_id: str | None = None,
        **options: Any,
    ) -> list[Hit]:
        """The user's memories most relevant to ``query`` across all threads (the retrieval
        layer's search), best first, with one exception: a round that answers a question the
        assistant asked comes right before the hit that ends with that question, when it scores at
        least ``answer_share`` of it (what the user answered is the memory; the question only names
        its subject), so a score may be higher below it; [] when nothing is relevant."""
        scope = self.scope(user_id, tenant=tenant, agent_id=agent_id)
        layer = self._retrieval(options)
        return layer.search(scope, query, k=k, at=in_range(at, field_name="at") if at is not None else utcnow(), where=where)

    def history(
        self,
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        at: datetime | None = None,
        last: int | None = None,
        order: str = "time",
        replaced: str = "exclude",
    ) -> list[Message]:
        """A thread's stored messages (up to ``at``; only the ``last`` n if given) in time order,
        ties as stored: a back-dated or imported message reads in its place, in the CLI and REST
        alike. ``order="append"``: as stored, for a caller that replays the conversation as the
        app sent it (LangChain's history, a proxy matching what the client resends).
        ``replaced``: "exclude" (the default) leaves out the answers a regenerated one replaced,
        the thread as its client shows it; "include" keeps them (the new answer's
        ``metadata["replaces"]`` names them; ``replaced.replaced_by`` maps them to it)."""
        scope = self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        options = read_options(at, last, order)
        if check_replaced(replaced) == "include":
            return self.store.history.read(scope, **options)
        return visible_tail(lambda n: self.store.history.read(scope, **{**options, "last": n}), last)

    def threads(self, *, user_id: str, tenant: str | None = None, agent_id: str | None = None) -> list[ThreadInfo]:
        return self.store.history.threads(self.scope(user_id, tenant=tenant, agent_id=agent_id))

    def memories(
        self, kind: str, *, user_id: str, thread_id: str | None = None, tenant: str | None = None, agent_id: str | None = None
    ) -> list[Record]:
        """The current model-made records of a kind: "summary" (of a thread), "entity",
        "relation" or "state" (the user's; a thread's with ``state_per_thread``)."""
        return self._records().current(self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id), kind)

    def audit(
        self, *, user_id: str, tenant: str | None = None, agent_id: str | None = None, kind: str | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        """Every add, supersede and delete of the user's model-made memory, newest first."""
        return self._records().audit(self.scope(user_id, tenant=tenant, agent_id=agent_id), kind=kind, limit=limit)

    def usage(self, *, user_id: str, tenant: str | None = None, agent_id: str | None = None) -> list[UsageRecord]:
        """The model calls made for the user: layer, model, tokens, latency, failures."""
        return usage_of(self.store).read(self.scope(user_id, tenant=tenant, agent_id=agent_id))

    def _records(self) -> RecordStore:
        return records_of(self.store)

    # ---- one-off extraction -----------------------------------------------------------------

    def extract(
        self,
        messages: MessageLike | Iterable[MessageLike],
        schema: type[T],
        *,
        model: str | ChatModel | None = None,
        instructions: str | None = None,
        grounded: bool = True,
        max_tokens: int | None = 768,
        retries: int = 1,
    ) -> T:
        """Extract an instance of ``schema`` (a pydantic model class) from ``messages``, with the
        extraction's machinery: a prompt in the turns' language that forbids invention (or
        ``instructions``), the schema enforced natively where the model can or shown to it,
        repair of malformed JSON, ``retries`` with the error shown, and (``grounded``) the named
        list items (``entities: list[Entity]``) that no turn mentions left out. Nothing is stored.

        ``model``: a provider string or ChatModel (default: the ``model`` option, else the local
        model). InvalidInput for a schema that is not a pydantic model class or messages without
        text; ModelOutputError (``raw``: the last answer) when the output stays invalid.
        """
        from .llm import custom, get_chat_model

        custom.check_schema(schema)  # InvalidInput for what is no pydantic model class
        stamp = utcnow()
        turns = [self._validate(self._coerce(m, stamp)) for m in _as_list(messages)]
        chat = get_chat_model(model if model is not None else self.options.get("model"))
        value = custom.extract_schema(chat, turns, schema, instructions=instructions, max_tokens=max_tokens, retries=retries).value
        return custom.grounded(value, turns) if grounded else value

    # ---- deleting, export, import ----------------------------------------------------------

    def forget(
        self, *, user_id: str, thread_id: str | None = None, tenant: str | None = None, agent_id: str | None = None, by: str = "library"
    ) -> int:
        """Delete one thread (with everything keyed to it), or the whole user in every store. The
        store keeps a note of it (``Store.deletions``: when, by whom, how many rows of what; no
        content): ``by`` names who forgot, as the audit trail names its writers ("ui", "api",
        "cli", "tool")."""
        scope = self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        outside: int = sum(
            layer.forget(scope)
            for layer in (self._layer(n, {}) for n in dict.fromkeys([*self.write_layers, *self.layers]))
            if hasattr(layer, "forget")
        )
        if thread_id is not None:
            return outside + self.store.history.delete_thread(scope, layer=by)
        return outside + self.store.delete_user(scope, layer=by)

    def forget_saved(
        self, memory_id: str, *, user_id: str, tenant: str | None = None, agent_id: str | None = None, by: str = "library"
    ) -> Unit:
        """Delete one saved memory (the tools' note or key/value memory) of the user by id, from the
        store and the retrieval index, leaving a deletion note by ``by`` (no text, no id); returns
        what was deleted. InvalidInput for an id that is no saved memory of this user."""
        scope = self.scope(user_id, tenant=tenant, agent_id=agent_id)
        return saved.forget(self.store, self._retrieval({}).index, scope, memory_id, by=by)

    def export(self, *, user_id: str, tenant: str | None = None) -> Iterator[dict[str, Any]]:
        """Every message of the user, thread by thread, as JSON-ready records, then the user's
        saved memories (the tools' notes and key/value memories, records ``{"type": "note"}``,
        see ``memstack.saved``); ``import_`` reads both back."""
        user = self.scope(user_id, tenant=tenant)
        for info in sorted(self.store.history.threads(user), key=lambda t: (t.first_at, t.thread_id)):
            scope = (
                user.thread(info.thread_id) if info.agent_id is None else replace(user, thread_id=info.thread_id, agent_id=info.agent_id)
            )
            for m in self.store.history.read(scope):
                yield {
                    "tenant": scope.tenant,
                    "user_id": scope.user_id,
                    "agent_id": scope.agent_id,
                    "thread_id": scope.thread_id,
                    **m.to_dict(),
                }
        for unit in saved.saved_units(self.store, user):
            yield saved.to_record(unit)

    def import_(self, records: Iterable[Mapping[str, Any]], *, tenant: str | None = None) -> int:
        """Store exported records (dates, ids and metadata kept); all are validated before any is
        written; re-importing the same records adds nothing. Saved memories (records of type
        "note") are stored and indexed at once, as the tools store them. Returns the messages
        and saved memories stored."""
        batches: list[tuple[Scope, list[Message]]] = []
        notes: list[Unit] = []
        for i, rec in enumerate(records, 1):
            try:
                user_id: Any = rec.get("user_id")  # checked by Scope: InvalidInput when missing or bad
                if saved.is_record(rec):
                    notes.append(
                        saved.from_record(rec, self.scope(user_id, tenant=tenant or rec.get("tenant"), agent_id=rec.get("agent_id")))
                    )
                    continue
                scope = self.scope(user_id, rec.get("thread_id"), tenant=tenant or rec.get("tenant"), agent_id=rec.get("agent_id"))
                scope.require_thread()
                fields = {k: v for k, v in rec.items() if k not in ("tenant", "user_id", "agent_id", "thread_id")}
                message = self._validate(Message.from_dict(fields))
            except InvalidInput as exc:
                raise InvalidInput(
                    f"record {i}: {exc}", field=f"records[{i - 1}].{exc.field}" if exc.field else f"records[{i - 1}]"
                ) from exc
            if batches and batches[-1][0] == scope:
                batches[-1][1].append(message)
            else:
                batches.append((scope, [message]))
        writers = self._writers()
        stored = sum(len(self.store.history.append(scope, msgs, enqueue=writers)) for scope, msgs in batches)
        return stored + self._import_notes(notes)

    def _import_notes(self, notes: list[Unit]) -> int:
        """Store and index the saved memories the store does not hold as they are; the count."""
        if not notes:
            return 0
        units: UnitStore | None = getattr(self.store, "units", None)
        if units is None:
            raise UsageError(
                f"the {type(self.store).__name__} backend has no units index: saved memories need sqlite, postgresql or memory"
            )
        new = [u for u in notes if units.get(u.scope.user(), [u.id]) != [u]]
        saved.index_notes(self._layer("retrieval", {}), self.store, new)
        return len(new)

    # ---- the write queue -------------------------------------------------------------------

    def run_jobs(
        self,
        *,
        final: bool = False,
        max_jobs: int | None = None,
        user_id: str | None = None,
        worker: str | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        tenant: str | None = None,
    ) -> JobReport:
        """Claim and run queued write-side jobs (of ``user_id`` of ``tenant``, else of every user)
        until none is ready (or ``max_jobs`` ran). ``progress(done, total, job)`` after each job;
        the total is what was pending, counted again when more arrived."""
        scope = self.scope(user_id, tenant=tenant) if user_id else None
        return self._jobs.run(final=final, max_jobs=max_jobs, scope=scope, worker=worker, progress=progress)

    def flush(
        self, *, user_id: str | None = None, progress: Callable[[int, int, str], None] | None = None, tenant: str | None = None
    ) -> JobReport:
        """Run every ready job now (the user's of ``tenant``, else every one), without waiting for batches to fill."""
        return self.run_jobs(final=True, user_id=user_id, progress=progress, tenant=tenant)

    def retention_pass(self, *, force: bool = False) -> list[expiry.RetentionRun]:
        """Apply the retention policy (``memstack.retention``) of this Memory's tenant, of the
        tenants it wrote for and of ``retention_tenants``, each at most once per
        ``retention_every`` (across processes: the store records the last pass); this process
        looks at the store for a tenant at most once a minute. ``force``: look and pass now. The
        background worker and ``memstack worker`` call it."""
        clock = time.monotonic()
        tenants = [
            t
            for t in sorted({self.tenant, *self._profiled, *self.retention_tenants})
            if force or clock - self._retention_looked.get(t, -math.inf) >= LOOK_SECONDS
        ]
        for tenant in tenants:
            self._retention_looked[tenant] = clock
        return expiry.run_due(self.store, tenants, every=timedelta(0) if force else self.retention_every, index=self.vectors)

    def start_worker(self, *, poll_seconds: float = 1.0) -> None:
        """Drain the queue in a daemon thread, woken by every ``add`` (and every ``poll_seconds``)."""
        self._jobs.start(poll_seconds=poll_seconds)

    @property
    def worker_running(self) -> bool:
        """Whether the background worker (``start_worker``) is running."""
        return self._jobs.running

    def stop_worker(self, *, drain: bool = True) -> None:
        """Stop the background worker (its running job finishes); ``drain``: then run what is ready."""
        self._jobs.stop(drain=drain)

    def close(self) -> None:
        """Stop the background worker (finishing queued work) and close the store (and the
        vector index, when this Memory opened it from a URL)."""
        self.stop_worker()
        if self._owns_vectors and self.vectors is not None:
            self.vectors.close()  # type: ignore[attr-defined]
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_schemas(options: Mapping[str, Any] | None, entity_schema: Any, state_schema: Any) -> dict[str, Any] | None:
    """The options with the developer's schemas in: the entity schema as the class itself (the
    extractor maps its items), the state schema as its JSON schema (kept in the profile)."""
    if entity_schema is None and state_schema is None:
        return dict(options) if options is not None else None
    from .llm.custom import check_schema, entity_items
    from .llm.structured import json_schema_for

    out = dict(options or {})
    if entity_schema is not None:
        entity_items(check_schema(entity_schema, "entity_schema"))
        out["entity_schema"] = entity_schema
    if state_schema is not None:
        out["state_schema"] = (
            dict(state_schema) if isinstance(state_schema, Mapping) else json_schema_for(check_schema(state_schema, "state_schema"))
        )
    return out


def _with_retention(profile: Profile) -> str:
    """The profile's one line, with its retention policy when it has one (``memstack init``'s refusal)."""
    kept = profile.retention
    return profile.describe() + ("" if kept.keeps_everything else f" (retain {kept.describe()})")


def vectors_location(index: VectorIndex | None, store: Store) -> str | None:
    """Where a profile says the vectors are: None for the store's own index, else the index's
    ``location`` (``milvus:COLLECTION``) or its class."""
    if index is None or index is getattr(store, "vectors", None):
        return None
    return getattr(index, "location", None) or f"{type(index).__module__}.{type(index).__qualname__}"


def read_options(at: datetime | None, last: int | None, order: str) -> dict[str, Any]:
    """``HistoryStore.read``'s options for ``Memory.history``, checked."""
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or not 0 <= last <= MAX_LAST):
        raise InvalidInput(f"last must be a whole number from 0 to {MAX_LAST}", field="last")
    return {"until": in_range(at, field_name="at") if at is not None else None, "last": last, "order": order}


def _as_list(messages: MessageLike | Iterable[MessageLike]) -> list[MessageLike]:
    if isinstance(messages, (Message, str, Mapping)):
        return [messages]
    return list(messages)


def _tail_is_enough(loaded: list[Message], kept: list[Message]) -> bool:
    """True when loading older messages cannot change the result of tail layers: a user message
    of the loaded tail was dropped, and it precedes every kept conversation message."""
    kept_ids = {m.id for m in kept if m.role != "system"}
    for m in loaded:
        if m.id in kept_ids:
            return False
        if m.role == "user":
            return True
    return False


def render_sections(sections: Sequence[Section]) -> str:
    """One system message's text: each section as its layer wrote it (with its own heading)."""
    return "\n\n".join(s.text for s in sections)


def _assemble(out: LayerOutput, query: Message | None, budget: int | None, counter: TokenCounter) -> Context:
    """Order the parts, fit sections into the memory room (``memory_room``) and the whole into
    the budget, report."""
    system = [m for m in out.messages if m.role == "system"]
    convo = [m for m in out.messages if m.role != "system"]
    tail = [query] if query else []
    dropped = list(out.dropped)
    fixed = counter.count_messages(system) + counter.count_messages(tail)
    if budget is not None and fixed > budget:
        raise BudgetError(f"system messages and the query need {fixed} tokens, over max_tokens={budget}")
    sections = out.sections
    if budget is not None and sections:
        sections, left_out = pack(sections, memory_room(budget - fixed, counter.count_messages(convo), counter), counter)
        dropped += [Dropped(s.name, "memory section over its share of the budget", s.source_ids, counter.count(s.text)) for s in left_out]
    memory = [Message(role="system", content=render_sections(sections), id="memstack-memory")] if sections else []
    while memory and budget is not None and fixed + counter.count_messages(memory) > budget:
        worst = max(range(len(sections)), key=lambda i: (sections[i].priority, i))
        dropped.append(
            Dropped(sections[worst].name, "memory section over the budget", sections[worst].source_ids, counter.count(sections[worst].text))
        )
        sections = sections[:worst] + sections[worst + 1 :]
        memory = [Message(role="system", content=render_sections(sections), id="memstack-memory")] if sections else []
    if budget is not None:
        room = budget - fixed - counter.count_messages(memory)
        fitted = trim(convo, room, counter, include_system=False) if counter.count_messages(convo) > room else convo
        if len(fitted) < len(convo):
            kept = {m.id for m in fitted}
            gone = [m for m in convo if m.id not in kept]
            dropped.append(Dropped("budget", f"over max_tokens={budget}", tuple(m.id for m in gone), counter.count_messages(gone)))
        convo = fitted
    final = system + memory + convo + tail
    report = {
        "system": counter.count_messages(system),
        "memory": counter.count_messages(memory),
        "history": counter.count_messages(convo),
        "query": counter.count_messages(tail),
    }
    report.update({f"memory:{s.name}": counter.count(s.text) for s in sections})
    return Context(tuple(final), counter.count_messages(final), report, tuple(dropped), budget, counter.name)
