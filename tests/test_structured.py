"""Structured output: parsing, repair, retry, and that malformed model output only ever becomes ModelOutputError."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from memstack.errors import InvalidInput, ModelOutputError, ProviderRejected, ProviderUnavailable
from memstack.llm.base import ChatModel, Completion
from memstack.llm.structured import MAX_OUTPUT_CHARS, Structured, generate, json_schema_for, parse_output
from memstack.testing import ScriptedModel


class Fact(BaseModel):
    subject: str = Field(min_length=1)
    predicate: str = Field(min_length=1)
    object: str = Field(min_length=1)
    evidence: str = Field(description="the words of the conversation that state the fact")


class Extraction(BaseModel):
    facts: list[Fact]


# Written for this test: what an extraction prompt should get back, in English and Chinese.
DOCS = [
    {
        "facts": [
            {"subject": "Alice", "predicate": "works at", "object": "Acme", "evidence": "I've been at Acme for two years"},
            {"subject": "Alice", "predicate": "lives in", "object": "Berlin", "evidence": "we moved to Berlin in May"},
        ]
    },
    {
        "facts": [
            {"subject": "张三", "predicate": "住在", "object": "北京", "evidence": "我家在北京海淀区"},
            {"subject": "张三", "predicate": "喜欢", "object": "吃辣", "evidence": "我特别能吃辣，无辣不欢"},
            {"subject": "张三", "predicate": "女儿", "object": "小美", "evidence": "我女儿小美今年六岁了"},
        ]
    },
    {
        "facts": [
            {
                "subject": "Bob",
                "predicate": "said",
                "object": 'the "plan" {draft}',
                "evidence": 'He wrote: "see {draft}, [v2]"\nand then left.',
            },
            {"subject": "李四", "predicate": "uses", "object": "Python 3.12", "evidence": "我们组用 Python 3.12 写后端"},
        ]
    },
    {"facts": []},
]
VALID = [json.dumps(d, ensure_ascii=False) for d in DOCS]
MESSAGES = [{"role": "system", "content": "Extract facts."}, {"role": "user", "content": "I live in Berlin."}]


def run(*outputs, native=False, **kwargs) -> tuple[Structured[Extraction], ScriptedModel]:
    model = ScriptedModel(outputs, native_schema=native)
    return generate(model, MESSAGES, Extraction, **kwargs), model


# -- parsing ----------------------------------------------------------------------------------


def test_valid_json_is_accepted_unrepaired():
    result, model = run(VALID[0])
    assert result.value == Extraction.model_validate(DOCS[0])
    assert result.repaired is False
    assert len(result.calls) == 1 and result.calls[0].completion_tokens > 0
    assert len(model.calls) == 1


def test_code_fence_with_prose_around():
    text = f"Sure! Here are the facts I found:\n\n```json\n{VALID[1]}\n```\n\nLet me know if you need more."
    result, _ = run(text)
    assert result.value == Extraction.model_validate(DOCS[1])
    assert result.repaired is False


def test_prose_around_json_without_fence():
    result, _ = run(f"Here you go: {VALID[2]} Hope this helps {{really}}.")
    assert result.value == Extraction.model_validate(DOCS[2])
    assert result.repaired is False


def test_think_block_first():
    text = '<think>The user says {"facts": "maybe"}... let me draft it.</think>\n' + VALID[0]
    result, _ = run(text)
    assert result.value == Extraction.model_validate(DOCS[0]) and not result.repaired


def test_think_close_tag_only_and_unclosed_think():
    assert parse_output('draft {"facts": 1}</think>' + VALID[3], Extraction) == (Extraction(facts=[]), False)
    with pytest.raises(ModelOutputError, match="empty"):
        parse_output('<think>still thinking {"facts": []', Extraction)


def test_fence_inside_a_json_string_is_not_unwrapped():
    doc = {"facts": [{"subject": "Bob", "predicate": "wrote", "object": "code", "evidence": "```py\nprint(1)\n```"}]}
    assert parse_output(json.dumps(doc), Extraction)[0] == Extraction.model_validate(doc)


@pytest.mark.parametrize(
    "text",
    [
        '{"facts": [{"subject": "Alice", "predicate": "lives in", "object": "Berlin", "evidence": "we moved",},],}',
        "{'facts': [{'subject': 'Alice', 'predicate': 'lives in', 'object': 'Berlin', 'evidence': 'we moved'}]}",
        '{facts: [{subject: "Alice", predicate: "lives in", object: "Berlin", evidence: "we moved"}]}',
    ],
    ids=["trailing-comma", "single-quotes", "unquoted-keys"],
)
def test_repairable_json_is_repaired(text):
    result, _ = run(text)
    assert result.value.facts == [Fact(subject="Alice", predicate="lives in", object="Berlin", evidence="we moved")]
    assert result.repaired is True
    assert len(result.calls) == 1


def test_single_quoted_brace_does_not_cut_the_object_short():
    text = "{'facts': [{'subject': 'A', 'predicate': 'p', 'object': 'x}', 'evidence': 'e'}]} trailing words"
    value, repaired = parse_output(text, Extraction)
    assert value.facts == [Fact(subject="A", predicate="p", object="x}", evidence="e")] and repaired


def cut_off(text: str) -> Completion:
    return Completion(text, "scripted", 10, 10, 0.1, finish_reason="length")


def test_truncated_output_keeps_the_finished_elements_and_is_flagged():
    cut = VALID[1][: VALID[1].index("女儿") - 3]  # cut inside the third fact
    result, _ = run(cut_off(cut))
    assert result.repaired is True
    assert [f.object for f in result.value.facts] == ["北京", "吃辣"]


def test_truncated_output_never_keeps_a_half_written_value():
    cut = VALID[0][: VALID[0].index("Berlin") + 3]  # '... "object": "Ber'
    result, _ = run(cut_off(cut))
    assert [f.object for f in result.value.facts] == ["Acme"] and result.repaired


class Note(BaseModel):
    title: str
    body: str = ""
    tags: list[str] = []


def test_truncated_output_cut_back_to_the_last_finished_member():
    value, repaired = parse_output('{"title": "Trip", "tags": ["a", "b"], "body": "We went to Ber', Note, truncated=True)
    assert value == Note(title="Trip", tags=["a", "b"]) and repaired
    value, _ = parse_output('{"title": "Trip", "tags": ["a", "bc', Note, truncated=True)
    assert value.tags == ["a"]
    value, _ = parse_output('{"title": "say \\"hi\\", {x}", "body": "to', Note, truncated=True)
    assert value == Note(title='say "hi", {x}')


def test_truncated_output_that_does_not_validate_is_retried_with_a_hint():
    result, model = run(cut_off('{"fac'), VALID[0])
    assert result.value == Extraction.model_validate(DOCS[0]) and result.repaired is False
    assert "cut off" in model.calls[1]["messages"][-1]["content"]


def test_truncated_output_drops_only_the_trailing_element():
    bad_first = dict(DOCS[0]["facts"][0], subject="")
    text = json.dumps({"facts": [bad_first, DOCS[0]["facts"][1]]})
    with pytest.raises(ModelOutputError, match="facts.0.subject"):
        parse_output(text[: text.index("lives in") + 3], Extraction, truncated=True)


def test_stop_reason_length_flags_even_valid_json():
    result, _ = run(Completion(VALID[3], "scripted", 1, 1, 0.1, finish_reason="length"))
    assert result.repaired is True


def test_lone_surrogates_are_refused():
    doc = VALID[0].replace("Acme", "Ac\\ud800me")
    with pytest.raises(ModelOutputError, match="surrogate"):
        parse_output(doc, Extraction)
    with pytest.raises(ModelOutputError, match="surrogate"):
        parse_output(VALID[0].replace("Acme", "Ac\ud800me"), Extraction)
    assert parse_output(VALID[0].replace("Acme", "Acme \\ud83d\\ude00"), Extraction)[0].facts[0].object == "Acme 😀"


def test_oversized_output_is_refused_unparsed():
    with pytest.raises(ModelOutputError, match="limit"):
        parse_output(" " * (MAX_OUTPUT_CHARS + 1) + VALID[0], Extraction)


# -- retry ------------------------------------------------------------------------------------


def test_validation_error_is_shown_to_the_model_and_retried():
    bad = '{"facts": [{"subject": "Alice", "predicate": "lives in", "evidence": "we moved"}]}'
    result, model = run(bad, VALID[0])
    assert result.value == Extraction.model_validate(DOCS[0])
    assert [c.text for c in result.calls] == [bad, VALID[0]]
    second = model.calls[1]["messages"]
    assert second[: len(second) - 2] == model.calls[0]["messages"]
    assert second[-2] == {"role": "assistant", "content": bad}
    assert second[-1]["role"] == "user"
    assert "facts.0.object: Field required" in second[-1]["content"]


def test_bad_output_is_shortened_when_echoed():
    long_bad = "no JSON here, " * 200
    _, model = run(long_bad, VALID[3])
    echoed = model.calls[1]["messages"][-2]["content"]
    assert len(echoed) < 500 and echoed.endswith("…")


def test_two_failures_raise_model_output_error_with_raw():
    model = ScriptedModel(["not json at all", '{"facts": "none"}'])
    with pytest.raises(ModelOutputError) as info:
        generate(model, MESSAGES, Extraction)
    assert info.value.raw == '{"facts": "none"}'
    message = str(info.value)
    assert "\n" not in message and message.startswith("Extraction: ") and "facts" in message
    assert message.endswith("(after 2 attempts)")
    assert len(model.calls) == 2


def test_retries_zero_makes_one_call_and_more_retries_make_more():
    with pytest.raises(ModelOutputError):
        generate(ScriptedModel(["x"]), MESSAGES, Extraction, retries=0)
    result = generate(ScriptedModel(["x", "y", VALID[3]]), MESSAGES, Extraction, retries=2)
    assert len(result.calls) == 3
    with pytest.raises(InvalidInput):
        generate(ScriptedModel([]), MESSAGES, Extraction, retries=-1)


@pytest.mark.parametrize("error", [ProviderUnavailable("503 from upstream"), ProviderRejected("bad key")])
def test_provider_errors_propagate_unchanged(error):
    with pytest.raises(type(error)) as info:
        run(error)
    assert info.value is error
    with pytest.raises(type(error)):
        run("junk", error)  # also on the retry


def test_max_tokens_and_temperature_reach_the_model():
    _, model = run(VALID[3], max_tokens=123, temperature=0.3)
    assert model.calls[0]["max_tokens"] == 123 and model.calls[0]["temperature"] == 0.3


# -- prompt and native schema -----------------------------------------------------------------


def test_native_schema_passes_the_schema_and_no_instruction():
    _, model = run(VALID[0], native=True)
    call = model.calls[0]
    assert call["schema"] == json_schema_for(Extraction)
    assert call["messages"] == MESSAGES


def test_prompted_schema_appends_the_instruction_to_the_system_message():
    _, model = run(VALID[0])
    call = model.calls[0]
    assert call["schema"] is None
    system = call["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Extract facts.\n\n")
    assert "one JSON object" in system["content"]
    assert json.dumps(json_schema_for(Extraction), separators=(",", ":")) in system["content"]
    assert call["messages"][1:] == MESSAGES[1:]
    assert MESSAGES[0]["content"] == "Extract facts."  # the caller's messages are not mutated


def test_prompted_schema_adds_a_system_message_when_none_leads():
    model = ScriptedModel([VALID[0]])
    generate(model, [{"role": "user", "content": "hi"}], Extraction)
    first = model.calls[0]["messages"][0]
    assert first["role"] == "system" and "JSON" in first["content"]


def test_chinese_instruction_and_correction():
    model = ScriptedModel(["不是 JSON", VALID[1]])
    generate(model, [{"role": "user", "content": "我住在北京"}], Extraction, language="zh")
    system = model.calls[0]["messages"][0]["content"]
    assert "只输出一个 JSON 对象" in system and "JSON Schema" in system
    assert "请只重新输出修正后的 JSON 对象" in model.calls[1]["messages"][-1]["content"]


def test_json_schema_for_inlines_defs():
    schema = json_schema_for(Extraction)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    assert schema["properties"]["facts"]["items"]["properties"]["evidence"]["description"].startswith("the words")


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_json_schema_for_keeps_defs_of_recursive_models():
    schema = json_schema_for(Node)
    assert "$defs" in schema or "$ref" in json.dumps(schema)
    assert parse_output('{"name": "a", "children": [{"name": "b"}]}', Node)[0].children[0].name == "b"


def test_array_schemas_look_for_an_array():
    from pydantic import RootModel

    Facts = RootModel[list[Fact]]
    value, _ = parse_output(f"The list: {json.dumps(DOCS[0]['facts'])}", Facts)
    assert len(value.root) == 2


# -- the scripted model -----------------------------------------------------------------------


def test_scripted_model_contract():
    model = ScriptedModel(["a"], default="z")
    assert isinstance(model, ChatModel)
    assert model.complete([{"role": "user", "content": "q"}]).text == "a"
    assert model.complete([]).text == "z" and model.complete([]).text == "z"
    assert model.count_tokens("hello world") >= 2


def test_scripted_model_exhausted_raises_assertion():
    model = ScriptedModel([lambda messages, schema: f"{len(messages)} {schema is None}"])
    assert model.complete([{"role": "user", "content": "q"}]).text == "1 True"
    with pytest.raises(AssertionError, match="no output left"):
        model.complete([])


def test_scripted_model_raises_scripted_errors_and_returns_completions():
    error = ProviderUnavailable("timeout")
    done = Completion("{}", "m", 1, 1, 0.1, finish_reason="length")
    model = ScriptedModel([error, done, lambda messages, schema: error])
    with pytest.raises(ProviderUnavailable):
        model.complete([])
    assert model.complete([]) is done
    with pytest.raises(ProviderUnavailable):
        model.complete([], schema={"type": "object"}, max_tokens=5)
    assert model.calls[2] == {"messages": [], "schema": {"type": "object"}, "max_tokens": 5, "temperature": 0.0}


# -- acceptance: 200 malformed outputs --------------------------------------------------------


Case = tuple[str, "str | Completion", int | None]  # kind, output, index of the document it came from


def _truncations(doc: str, source: int) -> list[Case]:
    """Every 13th of the document, alternately as a plain answer and as one the provider says was cut off."""
    step = max(1, len(doc) // 13)
    return [("cut", cut_off(doc[:k]), source) if n % 2 else ("truncated", doc[:k], source) for n, k in enumerate(range(0, len(doc), step))]


def _drop_or_duplicate(doc: str, source: int) -> list[Case]:
    out: list[Case] = []
    for char in '"{}[],:':
        positions = [i for i, c in enumerate(doc) if c == char]
        for i in positions[:: max(1, len(positions) // 2)][:2]:
            out.append(("dropped", doc[:i] + doc[i + 1 :], source))
            out.append(("duplicated", doc[:i] + char + doc[i:], source))
    return out


GARBAGE = ["@@", "\x00", "}{", "\\", "'", "，", "NaN", "<|im_end|>", "\ud800", "```"]


def _insert_garbage(doc: str, source: int) -> list[Case]:
    at = [(source * 31 + i * 17) % len(doc) for i in range(len(GARBAGE))]
    return [("garbage", doc[:i] + g + doc[i:], source) for i, g in zip(at, GARBAGE, strict=True)]


def _loosen(doc: str, source: int) -> list[Case]:
    return [
        ("loose", doc.replace('"}', '",}').replace("]}", ",]}"), source),
        ("loose", doc.replace('"', "'"), source),
        ("loose", doc.replace('"facts"', "facts").replace('"subject"', "subject"), source),
    ]


def _wrap(doc: str, source: int) -> list[Case]:
    return [
        ("wrapped", f"Here are the facts:\n{doc}\nDone.", source),
        ("wrapped", f"```json\n{doc}\n```", source),
        ("wrapped", f"<think>I should list {{facts}}.</think>{doc}", source),
        ("wrapped", f"好的，以下是提取结果：\n```\n{doc}\n```\n希望有帮助。", source),
    ]


JUNK = [
    "",
    "   \n\t",
    "I could not find any facts.",
    "没有找到任何事实。",
    "null",
    "42",
    "[]",
    "{}",
    '"facts"',
    "[" * 50_000,
    '{"facts":' * 20_000,
    "{" * 100_000 + "}" * 100_000,
    '{"facts": [' + "[" * 5_000 + "]" * 5_000 + "]}",
    "\ud800\udfff\udbff junk \udcff",
    "{\udcff\udcfe}",
    '{"facts": [{"subject": "\\ud800", "predicate": "p", "object": "o", "evidence": "e"}]}',
    '{"facts": "x"}',
    '{"facts": [1, 2]}',
    '{"facts": [{"subject": 1, "predicate": [], "object": {}, "evidence": null}]}',
    '{"facts": null}',
    '{"facts": [{"subject": "", "predicate": "p", "object": "o", "evidence": "e"}]}',
    "```json\n",
    "<think>",
    "</think>",
    "\x00\x01\x02{\x03",
    ("{" * 20 + "}" * 20) * 100,  # json_repair's slow path, kept short
    "{" + "x" * 1_200_000,
    "{'facts': [" + "{'subject': 'x', " * 12_000,
    '{"facts": [{"subject": "A", "predicate": "p", "object": "o", "evidence": "e"}]}' * 2,
    "[" + VALID[0] + "]",
]


def malformed_outputs() -> list[Case]:
    cases: list[Case] = []
    for source, doc in enumerate(VALID):
        for make in (_truncations, _drop_or_duplicate, _insert_garbage, _loosen, _wrap):
            cases += make(doc, source)
    return cases + [("junk", text, None) for text in JUNK]


MALFORMED = malformed_outputs()


def test_there_are_at_least_200_malformed_outputs():
    assert len(MALFORMED) >= 200


def _text(output: str | Completion) -> str:
    return output.text if isinstance(output, Completion) else output


def _assert_valid(result: Structured[Extraction]) -> None:
    assert isinstance(result.value, Extraction)
    assert Extraction.model_validate(json.loads(result.value.model_dump_json())) == result.value


def test_malformed_outputs_only_ever_raise_model_output_error():
    outcomes = {"returned": 0, "repaired": 0, "failed": 0}
    for i, (kind, bad, source) in enumerate(MALFORMED):
        second = VALID[i % len(VALID)] if i % 3 == 0 else MALFORMED[(i * 7 + 3) % len(MALFORMED)][1]
        model = ScriptedModel([bad, second])
        try:
            result = generate(model, MESSAGES, Extraction)
        except ModelOutputError as exc:
            outcomes["failed"] += 1
            assert exc.raw == _text(second) and "\n" not in str(exc), (i, kind)
            continue
        outcomes["returned"] += 1
        outcomes["repaired"] += result.repaired
        _assert_valid(result)
        assert len(result.calls) == len(model.calls) <= 2
        if len(result.calls) > 1:
            continue
        if kind in ("truncated", "cut"):
            assert result.repaired, (i, bad)  # a cut-off answer is never passed off as complete
        if kind == "cut":  # and keeps only facts it finished, never a half-written one
            assert all(f.model_dump() in DOCS[source]["facts"] for f in result.value.facts), (i, bad)
        if kind == "wrapped":
            assert result.value == Extraction.model_validate(DOCS[source]) and not result.repaired
    assert min(outcomes.values()) > 10, outcomes  # every path was exercised


# -- property: any text at all ----------------------------------------------------------------

ANY_CHAR = st.characters(exclude_categories=())  # surrogates included
JSONISH = st.lists(
    st.sampled_from(
        list("{}[]\",:' \n\\`") + ["true", "null", "1e9", "中", "\ud800", "<think>", "</think>", "```json", '"facts"', '"subject"']
    ),
    max_size=40,
).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(ANY_CHAR, max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(["facts", "subject", "object", "x"]), children, max_size=3)
    ),
    max_leaves=12,
)
OUTPUTS = st.one_of(
    st.text(ANY_CHAR),
    JSONISH,
    JSON_VALUES.map(json.dumps),
    st.tuples(st.sampled_from(VALID), st.integers(0, 500), st.text(ANY_CHAR, max_size=3)).map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=OUTPUTS, second=OUTPUTS)
def test_any_text_only_ever_raises_model_output_error(first, second):
    model = ScriptedModel([first, second])
    try:
        result = generate(model, MESSAGES, Extraction)
    except ModelOutputError as exc:
        assert exc.raw == second
        return
    _assert_valid(result)
