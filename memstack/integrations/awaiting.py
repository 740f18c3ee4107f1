"""A Memory's methods awaited from an async framework (the OpenAI Agents SDK, AutoGen).

The frameworks' memory interfaces are coroutines; memstack offers ``Memory`` (blocking) and
``AsyncMemory`` (its methods as coroutines, on a bounded executor and PostgreSQL's async pool).
An adapter takes either: an AsyncMemory's methods are awaited as they are, a Memory's run in a
thread (``asyncio.to_thread``, as the SDK's own SQLiteSession runs its SQL), so the event loop
never waits on the store. A store URL, a path or None opens a Memory of the adapter's own
(``close`` closes it); a Memory or AsyncMemory given stays the caller's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, TypeVar

from ..aio import AsyncMemory
from ..memory import Memory
from ..stores import Store

R = TypeVar("R")

MemoryLike = Memory | AsyncMemory | Store | str | os.PathLike[str] | None


class Awaiting:
    """``await calls("add", ...)``: the named method of the Memory, awaited without blocking."""

    def __init__(self, memory: MemoryLike) -> None:
        self.asynchronous: AsyncMemory | None = memory if isinstance(memory, AsyncMemory) else None
        if isinstance(memory, AsyncMemory):
            self.memory: Memory = memory.memory
        elif isinstance(memory, Memory):
            self.memory = memory
        else:
            self.memory = Memory(memory)
        self._owns = not isinstance(memory, (Memory, AsyncMemory))

    async def __call__(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        if self.asynchronous is not None:
            return await getattr(self.asynchronous, method)(*args, **kwargs)
        return await asyncio.to_thread(getattr(self.memory, method), *args, **kwargs)

    async def run(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """A blocking call of the adapter's own (on the Memory's store), off the event loop."""
        if self.asynchronous is not None:
            return await self.asynchronous.run_sync(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def close(self) -> None:
        """Close the Memory if the adapter opened it (from a URL); a given one stays open."""
        if self._owns:
            await asyncio.to_thread(self.memory.close)
