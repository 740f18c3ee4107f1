"""LangChain adapters (``pip install "memstack[langchain]"``): a chat message history over a
memstack thread, a VectorStore over a user's units, a retriever over ``Memory.search``, a chat
model over memstack's models (``MemstackChatModel``), token counters for ``trim_messages``, and
the window layer's rule for a list of messages (``window_messages``).

    from memstack import Memory
    from memstack.integrations.langchain import MemstackChatMessageHistory, MemstackRetriever

    memory = Memory(layers=["window", "retrieval"])
    chain = RunnableWithMessageHistory(
        model, lambda session_id: MemstackChatMessageHistory(memory, user_id="u1", thread_id=session_id)
    )
    MemstackRetriever(memory=memory, user_id="u1", k=4).invoke("what sports do I like?")

    llm = MemstackChatModel(model="local")          # or "deepseek:deepseek-chat", "ollama:qwen3:8b", ...
    llm.with_structured_output(EntityExtraction).invoke(prompt)
    trim_messages(history, max_tokens=2000, token_counter=token_counter("ollama:qwen3:8b"))
    window_messages(state["messages"], k=2)         # the last 2 whole turns, system messages kept
"""

from __future__ import annotations

from .embedders import LangChainEmbedder, MemstackEmbeddings, as_embedder
from .langchain_chat import MemstackChatModel
from .langchain_documents import MemstackRetriever, MemstackVectorStore
from .langchain_history import MemstackChatMessageHistory, to_langchain, to_memstack
from .langchain_tokens import LangChainTokenCounter, token_counter
from .langchain_window import window_messages

__all__ = [
    "LangChainEmbedder",
    "LangChainTokenCounter",
    "MemstackChatMessageHistory",
    "MemstackChatModel",
    "MemstackEmbeddings",
    "MemstackRetriever",
    "MemstackVectorStore",
    "as_embedder",
    "to_langchain",
    "to_memstack",
    "token_counter",
    "window_messages",
]
