"""``open_memory(url)``: a ``Memory`` for a store URL, a ``Client`` for a memstack service, so that a
program moves from the embedded library to the service by changing one string.

    memory = open_memory("sqlite:///chat.db")                        # in this process
    memory = open_memory("http://10.0.0.5:8000", api_key="key-acme")  # a memstack serve

The two have the same methods and signatures (``memstack.client.steps`` says what a Client
refuses: another tenant, an agent, a conditional add) and raise the same errors.
"""

from __future__ import annotations

import os
from typing import Any

from .client import Client
from .memory import Memory

#: the URL schemes of a memstack service rather than a store
SERVICE_SCHEMES = ("http://", "https://")


def open_memory(url: str | os.PathLike[str] | None = None, **options: Any) -> Memory | Client:
    """A ``Client`` of the service at an ``http(s)://`` URL (``options``: ``api_key``, ``timeout``,
    ``retries``), else a ``Memory`` over the store the URL names (``sqlite:///file.db``,
    ``postgresql://...``, ``memory://``; None: the default SQLite file), ``options`` being
    Memory's (``layers``, ``preset``, ``tenant``, ...)."""
    if isinstance(url, str) and url.lower().startswith(SERVICE_SCHEMES):
        return Client(url, **options)
    return Memory(url, **options)
