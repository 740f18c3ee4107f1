"""Adapters for agent frameworks; each module imports its framework and names its extra if missing.

    memstack.integrations.langchain    chat message history, VectorStore, retriever   memstack[langchain]
    memstack.integrations.langgraph    checkpointer (BaseCheckpointSaver), BaseStore   memstack[langgraph]
    memstack.integrations.openai_agents  Session, memory in an Agent's instructions   memstack[openai-agents]
    memstack.integrations.autogen      autogen-core's Memory (AssistantAgent memory=)  memstack[autogen]
    memstack.integrations.llamaindex   agents' memory (BaseMemory), a memory block     memstack[llamaindex]

Nothing here is imported by ``memstack`` itself: the core runs without these frameworks.
"""
