"""LlamaIndex adapters (``pip install "memstack[llamaindex]"``): memstack as the memory of
LlamaIndex's agents (``MemstackMemory``, a ``BaseMemory``), as a block of LlamaIndex's own
``Memory`` (``MemstackMemoryBlock``), and the message mapping both ways.

    from llama_index.core.agent.workflow import FunctionAgent
    from memstack import Memory
    from memstack.integrations.llamaindex import MemstackMemory

    memory = Memory("chat.db", background=True)
    agent = FunctionAgent(llm=llm, tools=[...])
    await agent.run("我的后端用什么？", memory=MemstackMemory(memory, user_id="u1", thread_id="s2"))

    Memory.from_defaults(session_id="s2", memory_blocks=[MemstackMemoryBlock(memory, user_id="u1")])
"""

from __future__ import annotations

from .llamaindex_memory import MemstackMemory, MemstackMemoryBlock
from .llamaindex_messages import to_llamaindex, to_memstack

__all__ = ["MemstackMemory", "MemstackMemoryBlock", "to_llamaindex", "to_memstack"]
