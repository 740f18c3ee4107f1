"""The layer registry: every memory strategy registers a factory under a name, once.

``build_layer(name, store, **options)`` passes each factory only the options it declares, so one
set of options (``k=2, max_tokens=100``) can configure a whole stack. Third-party layers register
the same way, or through the ``memstack.layers`` entry-point group.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from ..errors import InvalidInput, UnknownName
from .base import Layer, LayerOutput, ReadRequest, Writer, WriteRequest

LayerFactory = Callable[..., Layer]
_REGISTRY: dict[str, LayerFactory] = {}
#: built-in layers with heavy imports (models, numpy), loaded on first use
_LAZY: dict[str, str] = {
    "retrieval": "memstack.layers.retrieval",
    "topic": "memstack.layers.retrieval",
    "extract": "memstack.layers.extractor",
    "summary": "memstack.layers.summary",
    "summary-buffer": "memstack.layers.summary",
    "entities": "memstack.layers.entities",
    "profile": "memstack.layers.entities",
    "graph": "memstack.layers.graph",
    "state": "memstack.layers.state",
}
_plugins_loaded = False
#: registered for the write queue, not for stacks: the model-backed layers' shared extraction job
INTERNAL = frozenset({"extract"})


def register_layer(name: str, factory: LayerFactory) -> None:
    """Register ``factory(**options) -> Layer`` under ``name`` (replacing an earlier one)."""
    _REGISTRY[name] = factory


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group="memstack.layers"):
        register_layer(ep.name, ep.load())


def layer_names() -> list[str]:
    _load_plugins()
    return sorted(set(_REGISTRY) | set(_LAZY))


def user_layer_names() -> list[str]:
    """The layers a stack names, as the README describes them (and plugins'): the registry less
    INTERNAL, so that an error never suggests a name that is no strategy."""
    return [n for n in layer_names() if n not in INTERNAL]


def _unknown(name: str) -> UnknownName:
    return UnknownName(f"unknown layer {name!r}; the layers are: {', '.join(user_layer_names())}")


def build_layer(name: str, **options: Any) -> Layer:
    """A layer instance from the registry, given the options its factory accepts."""
    _load_plugins()
    if name not in _REGISTRY and name in _LAZY:
        importlib.import_module(_LAZY[name])
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise _unknown(name) from None
    params = inspect.signature(factory).parameters
    accepted = {k: v for k, v in options.items() if k in params and v is not None}
    try:
        return factory(**accepted)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"layer {name!r}: {exc}") from exc


def parse_stack(spec: str) -> list[str]:
    """``"full,window"`` -> ["full", "window"]; names are checked against the registry."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise InvalidInput("empty strategy: name at least one layer", field="strategy")
    for n in names:
        if n not in layer_names():
            raise _unknown(n)
    return names


from . import full, trim, window  # noqa: E402  (built-in layers register themselves)

__all__ = [
    "Layer",
    "LayerOutput",
    "ReadRequest",
    "WriteRequest",
    "Writer",
    "build_layer",
    "layer_names",
    "user_layer_names",
    "parse_stack",
    "register_layer",
    "full",
    "trim",
    "window",
]
