"""A chat session without a screen: context -> model -> store, and the data behind each command.

Kept apart from the terminal UI so that what the chat does (what it sends, what it stores, what it
deletes) is tested without a terminal, and any other front end can reuse it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path
from typing import Any

from .. import views
from ..errors import InvalidInput
from ..llm.base import ChatModel
from ..memory import Memory
from ..types import Context, utcnow

#: what the model is told before the memory section: answer as a helpful assistant that remembers
SYSTEM_PROMPT = (
    "You are a helpful assistant with a long-term memory of your conversations with this user. "
    "Use what the memory below says when it is relevant; answer in the user's language."
)
#: records stored per call of ``Memory.import_`` during /import: small enough for a moving bar
IMPORT_CHUNK = 200


@dataclass(frozen=True, slots=True)
class Memories:
    """What /memories shows: the user's entities and relations, this thread's summary notes, and
    how many earlier rounds retrieval finds for the last message (None when the stack has no retrieval)."""

    entities: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    query: str | None
    hits: int | None


def default_thread() -> str:
    """One thread per UTC day, the proxy's default too: a new day starts a new conversation while
    retrieval and the user's entities carry what matters across days."""
    return utcnow().date().isoformat()


class ChatSession:
    """One user's conversation with ``model`` over ``memory`` in one thread.

    ``ask`` builds the context for the user's line with the memory's stack, stores the line (kept
    even if the model then fails), asks the model and stores its answer; ``last_context`` keeps
    what was sent so that /context can show it. The context's budget leaves room for the answer
    and the system prompt inside the model's window.
    """

    def __init__(self, memory: Memory, model: ChatModel, *, user_id: str, thread_id: str | None = None, answer_tokens: int = 512) -> None:
        self.memory = memory
        self.model = model
        self.user_id = user_id
        self.thread_id = thread_id or default_thread()
        self.answer_tokens = answer_tokens
        self.last_context: Context | None = None
        self.last_query: str | None = None
        memory.scope(user_id, self.thread_id)  # validates the ids before the first line is typed

    @property
    def budget(self) -> int:
        """Tokens the context may take: the memory's budget, capped by the model's window less the answer and the prompt."""
        room = self.model.context_window - self.answer_tokens - self.memory.counter.count(SYSTEM_PROMPT) - 8
        return max(0, min(room, self.memory.max_tokens if self.memory.max_tokens is not None else room))

    def ask(self, text: str) -> str:
        """The model's answer to ``text``, with both stored in the thread."""
        ctx = self.memory.context(user_id=self.user_id, thread_id=self.thread_id, query=text, max_tokens=self.budget)
        self.memory.add(text, user_id=self.user_id, thread_id=self.thread_id)
        self.last_context, self.last_query = ctx, text
        answer = self.model.complete(prompt_messages(ctx), max_tokens=self.answer_tokens).text.strip()
        if answer:
            self.memory.add({"role": "assistant", "content": answer}, user_id=self.user_id, thread_id=self.thread_id)
        return answer

    def memories(self) -> Memories:
        scope = self.memory.scope(self.user_id)
        notes = self.memory.memories("summary", user_id=self.user_id, thread_id=self.thread_id)
        hits = None
        if "retrieval" in self.memory.layers and self.last_query:
            hits = len(self.memory.search(self.last_query, user_id=self.user_id))
        return Memories(
            entities=views.entities(self.memory.store, scope),
            relations=views.graph(self.memory.store, scope),
            notes=[n for r in notes for n in r.value.get("items", [])],
            query=self.last_query,
            hits=hits,
        )

    def state(self) -> dict[str, Any]:
        return views.state(self.memory.store, self.memory.scope(self.user_id))

    def forget(self, *, everything: bool = False) -> int:
        """Delete this thread (or, ``everything``, the user with all they own); returns records deleted."""
        n = self.memory.forget(user_id=self.user_id, thread_id=None if everything else self.thread_id, by="chat")
        self.last_context = self.last_query = None
        return n

    def import_file(self, path: str | Path, progress: Callable[[int, int], None] | None = None) -> int:
        """Store a JSON-lines export's messages as this user's (threads, dates and ids kept);
        returns messages stored. Every line is parsed before anything is stored; records go in
        chunks so that ``progress(done, total)`` can move, and a rerun after a failure stores only
        what is missing (duplicates by id are skipped)."""
        records = [self._as_mine(r) for r in read_jsonl(path)]
        stored = 0
        for start in range(0, len(records), IMPORT_CHUNK):
            stored += self.memory.import_(records[start : start + IMPORT_CHUNK])
            if progress is not None:
                progress(min(start + IMPORT_CHUNK, len(records)), len(records))
        return stored

    def _as_mine(self, record: Mapping[str, Any]) -> dict[str, Any]:
        return {**record, "user_id": self.user_id, "tenant": self.memory.tenant}


def prompt_messages(ctx: Context) -> list[dict[str, Any]]:
    """The context as OpenAI messages behind one system message: the chat's instructions and the
    context's leading system messages (the memory section) merged, since small models' chat
    templates only honour a system message that comes first."""
    messages = ctx.to_openai()
    lead = list(takewhile(lambda m: m.get("role") == "system", messages))
    system = "\n\n".join([SYSTEM_PROMPT] + [str(m.get("content") or "") for m in lead])
    return [{"role": "system", "content": system}] + messages[len(lead) :]


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; InvalidInput naming the line that is not a JSON object."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not valid UTF-8 (byte {exc.start})", field="file") from exc
    records = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{i}: not JSON: {exc.msg}", field="file") from exc
        if not isinstance(record, dict):
            raise InvalidInput(f"{path}:{i}: not a JSON object", field="file")
        records.append(record)
    return records
