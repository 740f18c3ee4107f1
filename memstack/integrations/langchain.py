"""LangChain adapters (``pip install "memstack[langchain]"``): a chat message history over a
memstack thread, a VectorStore over a user's units, and a retriever over ``Memory.search``.

    from memstack import Memory
    from memstack.integrations.langchain import MemstackChatMessageHistory, MemstackRetriever

    memory = Memory(layers=["window", "retrieval"])
    chain = RunnableWithMessageHistory(
        model, lambda session_id: MemstackChatMessageHistory(memory, user_id="u1", thread_id=session_id)
    )
    MemstackRetriever(memory=memory, user_id="u1", k=4).invoke("what sports do I like?")
"""

from __future__ import annotations

from .embedders import LangChainEmbedder, MemstackEmbeddings, as_embedder
from .langchain_documents import MemstackRetriever, MemstackVectorStore
from .langchain_history import MemstackChatMessageHistory, to_langchain, to_memstack

__all__ = [
    "LangChainEmbedder",
    "MemstackChatMessageHistory",
    "MemstackEmbeddings",
    "MemstackRetriever",
    "MemstackVectorStore",
    "as_embedder",
    "to_langchain",
    "to_memstack",
]
