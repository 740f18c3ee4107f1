"""memstack: memory for LLM chat apps and agents, per user, at a bounded token cost.

    from memstack import Memory
    memory = Memory()                                   # SQLite under MEMSTACK_HOME
    memory.add({"role": "user", "content": "我叫李四"}, user_id="u1", thread_id="s1")
    ctx = memory.context(user_id="u1", thread_id="s1", query="我叫什么？", strategy="window", k=2)
    client.chat.completions.create(model=..., messages=ctx.to_openai())

``AsyncMemory`` has the same methods as coroutines, for asyncio apps (``memstack.aio``);
``Client`` and ``AsyncClient`` the same over HTTP, against ``memstack serve`` (``memstack.client``),
and ``open_memory(url)`` opens either from one string.
"""

from .aio import AsyncMemory
from .backends import open_store
from .budget import pack, trim, window
from .client import AsyncClient, Client
from .connect import open_memory
from .errors import (
    BudgetError,
    Conflict,
    InvalidInput,
    JobError,
    MemstackError,
    MissingAPIKey,
    MissingDependency,
    ModelIntegrityError,
    ModelOutputError,
    NotFound,
    ProviderRejected,
    ProviderUnavailable,
    RuntimeFailure,
    SchemaError,
    StoreError,
    Unauthorized,
    Unavailable,
    UnknownName,
    UsageError,
)
from .jobs import JobReport
from .layers import build_layer, layer_names, register_layer
from .llm import ChatModel, Completion, get_chat_model
from .memory import Memory
from .stores import CheckpointStore, HistoryStore, JobQueue, RecordStore, StateStore, Store, UsageLog
from .tokens import TokenCounter, get_counter, register_counter
from .types import (
    AuditEvent,
    Change,
    Checkpoint,
    Context,
    Dropped,
    Hit,
    Message,
    Record,
    Scope,
    Section,
    ThreadInfo,
    ToolCall,
    Turn,
    Unit,
    UsageRecord,
    group_turns,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncMemory",
    "Client",
    "Conflict",
    "NotFound",
    "Unauthorized",
    "Unavailable",
    "open_memory",
    "AuditEvent",
    "Change",
    "ChatModel",
    "Completion",
    "Hit",
    "MissingAPIKey",
    "ModelIntegrityError",
    "ModelOutputError",
    "ProviderRejected",
    "ProviderUnavailable",
    "Record",
    "RecordStore",
    "Unit",
    "UsageLog",
    "UsageRecord",
    "get_chat_model",
    "BudgetError",
    "Checkpoint",
    "CheckpointStore",
    "Context",
    "Dropped",
    "HistoryStore",
    "InvalidInput",
    "JobError",
    "JobQueue",
    "JobReport",
    "Memory",
    "MemstackError",
    "Message",
    "MissingDependency",
    "RuntimeFailure",
    "SchemaError",
    "Scope",
    "Section",
    "StateStore",
    "Store",
    "StoreError",
    "ThreadInfo",
    "TokenCounter",
    "ToolCall",
    "Turn",
    "UnknownName",
    "UsageError",
    "__version__",
    "build_layer",
    "get_counter",
    "group_turns",
    "layer_names",
    "open_store",
    "pack",
    "register_counter",
    "register_layer",
    "trim",
    "window",
]
