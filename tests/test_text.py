"""Search terms for Chinese and English mixed text: segmentation, normalisation, stopwords."""

import subprocess
import sys

import pytest

from memstack.text import EN_STOPWORDS, ZH_STOPWORDS, analyze_query, segment


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("我平时喜欢跑步", ["平时", "喜欢", "跑步"]),
        ("我喜欢吃火锅", ["喜欢", "火锅", "吃火锅"]),
        ("我正在学习LangChain框架", ["正在", "学习", "langchain", "框架"]),
        ("我的后端使用SpringBoot", ["后", "端", "使用", "springboot"]),  # no HMM guessing: unknown words split the same everywhere
        ("John's dogs like running", ["john", "dog", "like", "run"]),
        ("She RUNS, he ran; they're running!", ["run", "ran", "run"]),
        ("Cities and studies", ["citi", "studi"]),
        ("２０２３年05月07日", ["2023", "年", "5", "月", "7", "日"]),
        ("ＬａｎｇＣｈａｉｎ１２３", ["langchain123"]),
        ("GPT-4o 发布了", ["gpt", "4o", "发布"]),
        ("o'clock rock'n'roll", ["o", "clock", "rock", "n", "roll"]),
        ("Café naïve Привет こんにちは", ["café", "naïve", "привет", "こんにちは"]),  # only plain ASCII words are stemmed
    ],
)
def test_segment(text, terms):
    assert segment(text) == terms


def test_search_mode_adds_the_words_inside_long_words():
    terms = segment("中华人民共和国成立了")
    assert {"中华人民共和国", "共和国", "人民", "成立"} <= set(terms)
    assert "流浪" in segment("流浪地球") and "地球" in segment("流浪地球")


def test_punctuation_and_stopwords_give_nothing():
    assert segment("！？。，、；：“”（）《》…—～ ,.;:!?()[]{}'\"-_/\\@#$%^&*+=<>|`~") == []
    assert segment("我的了吗呢吧啊") == []
    assert segment("what is it that you were doing there?") == []


def test_negations_are_kept():
    assert segment("我不喜欢香菜，没有去过北京") == ["不", "喜欢", "香菜", "没有", "去过", "北京"]
    assert segment("I don't like it, I can't swim and never will, no") == ["not", "like", "not", "swim", "never", "no"]
    assert "不" not in ZH_STOPWORDS and not {"not", "no", "never"} & EN_STOPWORDS


def test_repeats_count_and_queries_are_distinct_terms_in_order():
    assert segment("火锅 火锅 running runs") == ["火锅", "火锅", "run", "run"]
    assert analyze_query("火锅 火锅 running runs 火锅？") == ["火锅", "run"]
    assert analyze_query("我的了吗") == []


def test_words_added_to_jiebas_global_tokenizer_do_not_change_segmentation():
    import jieba

    before = segment("我平时喜欢跑步机器人")
    jieba.add_word("跑步机器人")
    try:
        assert segment("我平时喜欢跑步机器人") == before
    finally:
        jieba.del_word("跑步机器人")


LOADS_QUIETLY = """
import sys, threading
import memstack.text as text
assert "jieba" not in sys.modules, "jieba is imported at module import"
results = []
threads = [threading.Thread(target=lambda: results.append(text.segment("我正在学习LangChain框架"))) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert len(results) == 8 and all(r == results[0] for r in results), results
print(results[0])
"""


def test_jieba_loads_lazily_once_quietly_and_thread_safely():
    done = subprocess.run([sys.executable, "-c", LOADS_QUIETLY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "langchain" in done.stdout
