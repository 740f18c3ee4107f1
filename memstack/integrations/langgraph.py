"""LangGraph adapters (``pip install "memstack[langgraph]"``): a checkpointer and a long-term
store, both keeping their tables beside a memstack store's data (SQLite, PostgreSQL, memory://).

    from memstack.integrations.langgraph import MemstackSaver, MemstackStore

    graph = builder.compile(
        checkpointer=MemstackSaver("agent.db"),  # a SQLite file; with memory=Memory(...) also the
                                                  # graph's messages into its history (see the saver)
        store=MemstackStore("agent.db", index={"embed": "local", "fields": ["text"]}),
    )
"""

from __future__ import annotations

from .langgraph_saver import MemstackSaver
from .langgraph_store import MemstackStore

__all__ = ["MemstackSaver", "MemstackStore"]
