"""The LangChain adapters: langchain-tests' standard VectorStore and retriever suites, the chat
history under RunnableWithMessageHistory with a fake chat model, and the message mapping.

The standard suites contain async tests; this project runs pytest-asyncio in strict mode, so the
module marks every test for asyncio (the warning that the sync ones carry a needless mark is
silenced here).
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests  # noqa: E402
from pgsupport import drop_schema, require_dsn  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.backends import open_store  # noqa: E402
from memstack.errors import InvalidInput  # noqa: E402
from memstack.integrations.langchain import (  # noqa: E402
    MemstackChatMessageHistory,
    MemstackEmbeddings,
    MemstackRetriever,
    MemstackVectorStore,
    to_langchain,
    to_memstack,
)

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .*> is marked with '@pytest.mark.asyncio' but it is not an async function"),
]

# ---- the standard suites ---------------------------------------------------------------------


class TestVectorStoreOnMemory(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self):
        return MemstackVectorStore(open_store("memory://"), user_id="u1", embedding=self.get_embeddings())


class TestVectorStoreOnSQLite(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path):
        return MemstackVectorStore(f"sqlite:///{tmp_path / 'docs.db'}", user_id="u1", embedding=self.get_embeddings())


class TestVectorStoreOnPostgres(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self):
        from memstack.backends.postgres import PostgresStore

        dsn = require_dsn("LangChain vector store")
        schema = f"memstack_test_{uuid.uuid4().hex[:12]}"
        store = PostgresStore(dsn, schema=schema)
        yield MemstackVectorStore(store, user_id="u1", embedding=self.get_embeddings())
        store.close()
        drop_schema(dsn, schema)


SPORTS = [
    ("I play tennis every Saturday, it is my favourite sport.", "Nice, tennis is a great sport."),
    ("On Sundays I go swimming at the public pool for exercise.", "Swimming is good exercise."),
    ("I also play basketball with colleagues after work.", "Basketball is a fun team sport."),
    ("Running a marathon is my sport goal for next year.", "A marathon is a big sport goal!"),
    ("I watch football matches but do not play the sport myself.", "Watching football is fun."),
]


@functools.cache
def sports_memory() -> Memory:
    """A user who talked about five sports, indexed by the retrieval layer (local embedder)."""
    memory = Memory("memory://", layers=["window", "retrieval"])
    start = datetime(2026, 5, 1, 20, 0, tzinfo=timezone.utc)
    for i, (question, answer) in enumerate(SPORTS):
        memory.add(
            [{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
            user_id="u1",
            thread_id=f"s{i}",
            at=start + timedelta(days=i),
        )
    memory.flush()
    return memory


class TestRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        return MemstackRetriever

    @property
    def retriever_constructor_params(self):
        return {"memory": sports_memory(), "user_id": "u1"}

    @property
    def retriever_query_example(self) -> str:
        return "Which sport do I play?"


# ---- chat history ----------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_shares_the_thread():
    memory = Memory("memory://")
    seen: list[list] = []

    def remember(messages):
        seen.append(list(messages))
        return messages

    model = GenericFakeChatModel(messages=iter([AIMessage("Hello Li Si!"), AIMessage("Your name is Li Si.")]))
    chat = RunnableWithMessageHistory(
        RunnableLambda(remember) | model, lambda session_id: MemstackChatMessageHistory(memory, user_id="u1", thread_id=session_id)
    )
    config = {"configurable": {"session_id": "s1"}}
    assert chat.invoke([HumanMessage("My name is Li Si.")], config).content == "Hello Li Si!"
    assert chat.invoke([HumanMessage("What is my name?")], config).content == "Your name is Li Si."
    assert [m.content for m in seen[1]] == ["My name is Li Si.", "Hello Li Si!", "What is my name?"]
    stored = memory.history(user_id="u1", thread_id="s1")
    assert [(m.role, m.text) for m in stored] == [
        ("user", "My name is Li Si."),
        ("assistant", "Hello Li Si!"),
        ("user", "What is my name?"),
        ("assistant", "Your name is Li Si."),
    ]
    assert memory.history(user_id="u1", thread_id="s2") == []


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_an_empty_model_answer_keeps_the_users_message_and_says_why_the_answer_is_not_stored(caplog):
    """§4.10: an empty AI reply made the whole batch fail inside a LangChain callback (only logged)."""
    memory = Memory("memory://")
    model = GenericFakeChatModel(messages=iter([AIMessage(""), AIMessage("  "), AIMessage("Your name is Li Si.")]))
    chat = RunnableWithMessageHistory(model, lambda session_id: MemstackChatMessageHistory(memory, user_id="u1", thread_id=session_id))
    config = {"configurable": {"session_id": "s1"}}
    with caplog.at_level("WARNING", logger="memstack"):
        assert chat.invoke([HumanMessage("My name is Li Si.")], config).content == ""
        assert chat.invoke([HumanMessage("Hello?")], config).content == "  "
    skipped = [r for r in caplog.records if r.name.startswith("memstack") and "empty" in r.getMessage()]
    assert len(skipped) == 2 and all(r.levelname == "WARNING" for r in skipped)
    assert chat.invoke([HumanMessage("What is my name?")], config).content == "Your name is Li Si."
    stored = [(m.role, m.text) for m in memory.history(user_id="u1", thread_id="s1")]
    assert stored == [("user", "My name is Li Si."), ("user", "Hello?"), ("user", "What is my name?"), ("assistant", "Your name is Li Si.")]


def test_other_invalid_messages_are_refused_naming_the_message_and_nothing_is_stored():
    memory = Memory("memory://")
    history = MemstackChatMessageHistory(memory, user_id="u1", thread_id="s1")
    with pytest.raises(InvalidInput) as refused:
        history.add_messages([HumanMessage("hi"), HumanMessage("")])
    assert refused.value.field == "messages[1].content"
    with pytest.raises(InvalidInput) as refused:
        history.add_messages([AIMessage("ok"), ChatMessage("x", role="critic")])
    assert refused.value.field == "messages[1].role"
    assert memory.history(user_id="u1", thread_id="s1") == []


def test_history_feeds_the_memory_layers():
    memory = Memory("memory://", layers=["window", "retrieval"])
    history = MemstackChatMessageHistory(memory, user_id="u1", thread_id="s1")
    history.add_messages([HumanMessage("I adopted an orange cat named Doudou."), AIMessage("What a lovely name!")])
    memory.flush()
    hits = memory.search("What is my cat called?", user_id="u1")
    assert hits and "Doudou" in hits[0].unit.text


def test_clear_forgets_the_thread_only():
    memory = Memory("memory://")
    one = MemstackChatMessageHistory(memory, user_id="u1", thread_id="s1")
    two = MemstackChatMessageHistory(memory, user_id="u1", thread_id="s2")
    one.add_user_message("hello")
    two.add_user_message("hi")
    one.clear()
    assert one.messages == [] and [m.content for m in two.messages] == ["hi"]


def test_async_history_and_last_n(tmp_path):
    import asyncio

    history = MemstackChatMessageHistory(f"sqlite:///{tmp_path / 'h.db'}", user_id="u1", thread_id="s1", tenant="acme", agent_id="bot")

    async def run():
        await history.aadd_messages([HumanMessage("one"), AIMessage("two"), HumanMessage("three")])
        return await history.aget_messages()

    assert [m.content for m in asyncio.run(run())] == ["one", "two", "three"]
    reopened = MemstackChatMessageHistory(
        f"sqlite:///{tmp_path / 'h.db'}", user_id="u1", thread_id="s1", tenant="acme", agent_id="bot", last=2
    )
    assert [m.content for m in reopened.messages] == ["two", "three"]


def test_messages_round_trip_with_tool_calls_ids_and_timestamps():
    when = datetime(2024, 5, 1, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    history = MemstackChatMessageHistory(Memory("memory://"), user_id="u1", thread_id="s1")
    sent = [
        SystemMessage("You are helpful.", id="m0"),
        HumanMessage(
            [{"type": "text", "text": "Weather in Paris?"}, "and Lyon?"],
            id="m1",
            name="li",
            response_metadata={"timestamp": when.isoformat()},
        ),
        AIMessage(
            "",
            id="m2",
            tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}],
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            response_metadata={"model_name": "fake"},
        ),
        ToolMessage("18°C", tool_call_id="call_1", id="m3", status="error"),
        AIMessage("It is 18°C in Paris.", id="m4", additional_kwargs={"refusal": None, "extra": {"x": 1}}),
        ChatMessage("ok", role="human", id="m5"),
    ]
    history.add_messages(sent)
    history.add_messages(sent[:2])  # ids already stored: nothing is added twice
    back = history.messages
    assert [type(m).__name__ for m in back] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
    assert [m.id for m in back] == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert (
        back[1].content == [{"type": "text", "text": "Weather in Paris?"}, {"type": "text", "text": "and Lyon?"}] and back[1].name == "li"
    )
    assert datetime.fromisoformat(back[1].response_metadata["timestamp"]) == when
    assert back[2].tool_calls == [{"name": "weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}]
    assert back[2].usage_metadata["total_tokens"] == 15 and back[2].response_metadata["model_name"] == "fake"
    assert back[3].tool_call_id == "call_1" and back[3].status == "error" and back[3].content == "18°C"
    assert back[4].additional_kwargs == {"refusal": None, "extra": {"x": 1}}
    again = to_memstack(back[1])  # a message read back keeps its date when stored elsewhere
    assert again.timestamp == when and again.id == "m1"


def test_unmappable_messages_are_refused():
    with pytest.raises(InvalidInput, match="ChatMessage"):
        to_memstack(ChatMessage("x", role="critic"))
    with pytest.raises(InvalidInput, match="empty"):
        to_memstack(AIMessage(""))
    odd = to_memstack(AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]))
    bad = to_langchain(
        odd.__class__(
            **{**{f: getattr(odd, f) for f in odd.__slots__}, "tool_calls": (odd.tool_calls[0].__class__("c1", "f", "not json"),)}
        )
    )
    assert bad.tool_calls == [] and bad.invalid_tool_calls[0]["args"] == "not json"


# ---- vector store: what the standard suite does not check ------------------------------------


def test_documents_join_the_users_memory_and_default_to_the_local_embedder():
    memory = Memory("memory://", layers=["retrieval"])
    docs = MemstackVectorStore(memory, user_id="u1")
    docs.add_texts(
        ["The office wifi password is on the fridge.", "Our team standup is at 9:30 every morning."],
        [{"src": "wiki"}, {"src": "chat"}],
        ids=["d1", "d2"],
    )
    assert docs.similarity_search("when is the daily meeting?", k=1)[0].id == "d2"
    hits = memory.search("What time is the team standup?", user_id="u1")
    assert hits[0].unit.id == "d2" and hits[0].unit.kind == "note"
    found = MemstackRetriever(memory=memory, user_id="u1", k=1).invoke("What time is the team standup?")
    assert found[0].id == "d2" and found[0].metadata["src"] == "chat" and found[0].metadata["thread_id"] == "documents"
    assert MemstackVectorStore(memory, user_id="u2").similarity_search("meeting") == []  # another user's store is empty
    assert isinstance(docs.embeddings, MemstackEmbeddings) and len(docs.embeddings.embed_query("x")) == 384


def test_scores_filters_and_from_texts():
    fake = VectorStoreIntegrationTests.get_embeddings()
    docs = MemstackVectorStore.from_texts(
        ["foo", "bar", "baz"], fake, [{"n": 1}, {"n": 2}, {"n": 2}], ids=["1", "2", "3"], target="memory://", user_id="u1"
    )
    pairs = docs.similarity_search_with_score("bar", k=3)
    assert [d.id for d, _ in pairs][0] == "2" and pairs[0][1] == pytest.approx(1.0)
    assert all(0 <= s <= 1 for _, s in pairs) and [s for _, s in pairs] == sorted((s for _, s in pairs), reverse=True)
    assert sorted(d.id for d in docs.similarity_search("foo", k=3, filter={"n": 2})) == ["2", "3"]
    relevance = docs.similarity_search_with_relevance_scores("bar", k=1)
    assert relevance[0][1] == pytest.approx(1.0)
    assert docs.as_retriever(search_kwargs={"k": 1}).invoke("baz")[0].id == "3"


def test_ids_of_the_users_other_memories_are_neither_taken_nor_deleted():
    memory = Memory("memory://")
    fake = VectorStoreIntegrationTests.get_embeddings()
    notes = MemstackVectorStore(memory, user_id="u1", embedding=fake, thread_id="notes")
    other = MemstackVectorStore(memory, user_id="u1", embedding=fake, thread_id="docs")
    notes.add_texts(["alpha"], ids=["x"])
    with pytest.raises(InvalidInput, match="other memories"):
        other.add_texts(["beta"], ids=["x"])
    other.delete(["x"])
    assert other.get_by_ids(["x"]) == [] and [d.page_content for d in notes.get_by_ids(["x"])] == ["alpha"]
    other.add_texts(["gamma"], ids=["y"])
    other.delete()
    assert other.similarity_search("gamma") == [] and notes.similarity_search("alpha", k=1)[0].id == "x"


def test_bad_documents_are_refused():
    docs = MemstackVectorStore("memory://", user_id="u1", embedding=VectorStoreIntegrationTests.get_embeddings())
    with pytest.raises(InvalidInput, match="JSON"):
        docs.add_documents([Document("x", metadata={"when": object()})])
    with pytest.raises(InvalidInput, match="empty"):
        docs.add_texts(["  "])
    with pytest.raises(InvalidInput, match="ids"):
        docs.add_texts(["a", "b"], ids=["1"])
