"""Text analysis for keyword search: Chinese and English mixed text into normalised search terms.

``segment`` is what the unit stores index; ``analyze_query`` is what they search with. Both are
pure and deterministic for a given jieba dictionary, so terms stored at write time match terms
computed at query time (change the analysis, and the stores must be re-indexed from ``iterate``).

- Text is NFKC-normalised (full-width letters, digits and punctuation become ASCII) and casefolded.
- Runs of Chinese characters go to jieba's search-engine mode (``cut_for_search``: the words of
  precise mode plus the shorter dictionary words inside long ones, so 流浪地球 also yields 流浪 and
  地球), without HMM new-word guessing (it splits names differently in different contexts). On
  MemoryBank-CN (35 questions) BM25 Recall@1/@5 is .471/.857 with these terms; precise mode gives
  .457/.771, HMM on .443/.857, and keeping stopwords .486/.771.
- Other runs split into words of letters and digits; English words lose a possessive 's, "n't"
  becomes "not", and plain ASCII words are stemmed with Snowball's English stemmer (running, runs
  -> run: on 4 LoCoMo conversations BM25 Recall@5 went from .527 to .564); numbers keep their
  digits without leading zeros (05 -> 5).
- Punctuation is dropped, and so are stopwords of both languages: a short list of function words,
  particles, pronouns and question words. Negations (不, 没, 没有, not, no, never) are kept.

jieba loads its dictionary (about a second) once per process, on first use, quietly and under a
lock; it uses a private ``jieba.Tokenizer`` so that words an application adds to jieba's global
tokenizer cannot change how stored text was segmented.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jieba import Tokenizer

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_RUNS = re.compile(f"([{_HAN}]+)")
_WORDS = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_CONTRACTIONS = {"won": "will", "ca": "can", "sha": "shall"}
_CLITICS = frozenset({"s", "m", "re", "ve", "ll", "d"})


def _wordlist(words: str) -> frozenset[str]:
    return frozenset(words.split())


ZH_STOPWORDS = _wordlist(
    """
    的 地 得 之 了 着 过 是 在 和 与 及 或 而 并 也 都 就 还 又 才 把 被 让 给 对 从 向 跟 同 将 于 以 为 则
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 我的 你的
    这 那 这个 那个 这些 那些 这样 那样 这种 那种 这里 那里 这么 那么 其 其中 此
    吗 呢 吧 啊 呀 哦 噢 喔 嗯 哈 哈哈 啦 嘛 哇 呐 么 呗 哟 诶 欸
    什么 哪 哪个 哪些 哪里 哪儿 怎么 怎么样 怎样 如何 为什么 多少 几 谁 是否
    一个 一些 一下 一点 有点 很 非常 挺 太 比较 真的 就是 还是 但是 可是 不过 因为 所以 如果 虽然 然后
    """
)

EN_STOPWORDS = _wordlist(
    """
    a an the and or but if then so than as of to in on at by for with from into onto about over under
    is am are was were be been being do does did doing done have has had having
    i me my mine myself we us our ours you your yours he him his she her hers it its they them their theirs
    this that these those there here what which who whom whose when where why how
    can could will would shall should may might must just also very too really quite
    oh ok okay hi hello hey yes yeah please thanks thank s t d ll m re ve
    """
)

_lock = threading.Lock()
_tokenizer: Tokenizer | None = None


def _jieba() -> Tokenizer:
    """The process's private jieba tokenizer, loaded on first use without logging."""
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # jieba imports the deprecated pkg_resources
                    import jieba
                logging.getLogger("jieba").setLevel(logging.WARNING)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                _tokenizer = tokenizer
    return _tokenizer


def word_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of ``text``'s words as jieba cuts it (dictionary only, no guessing):
    where a stretch of Chinese text is a word of its own and where it is only part of one ("四" in
    "下周四")."""
    return [(start, end) for _word, start, end in _jieba().tokenize(text, HMM=False)]


#: the common Chinese surnames: a word jieba tags as a person's name counts as one only when it
#: opens with one (or with 老/小/阿 and one: "老秦"); its tagger also calls "喝咖啡" a name
SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫"
    "段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤柯常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮纪梅童凌毕单季裴霍涂"
    "成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师仇栾"
    "隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
)


@lru_cache(maxsize=4096)
def person_names(text: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, name) of each person's name in Chinese ``text`` as jieba's part-of-speech
    tagger reads it ("老秦", "张伟", "王老师", "陈姐"): two to four characters that open with a
    common surname. A guess, for one use: telling that a clause speaks of someone other than its
    speaker. Besides: a name of two characters that opens with 阿, 小 or 老 as the tagger reads
    names ("阿杰", "小雨"), and a doubled character that opens a clause ("豆豆最近开始学古筝了",
    the way children and pets are called), unless it is an adverb or a kin word ("天天", "妈妈").
    Not a word of three or more characters that ends as a place does ("岳麓区", which the tagger
    reads as a name)."""
    if not any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return ()
    out: list[tuple[int, int, str]] = []
    at = 0
    for pair in _tagger().cut(text):
        word, flag = pair.word, pair.flag
        start = text.find(word, at)
        if start < 0:
            continue
        at = start + len(word)
        surname = word[0] in SURNAMES or (word[0] in "老小阿" and (word[1:2] in SURNAMES or len(word) == 2))
        place = len(word) >= 3 and word[-1] in _PLACE_ENDS  # "岳麓区", tagged nr: a place
        if flag == "nr" and 2 <= len(word) <= 4 and surname and not place and all("\u4e00" <= ch <= "\u9fff" for ch in word):
            out.append((start, at, word))
    for m in _DOUBLED.finditer(text):
        if m.group(1) not in _NOT_DOUBLED_NAMES and all(m.start(1) != s for s, _e, _n in out):
            out.append((m.start(1), m.end(1), m.group(1)))
    return tuple(sorted(out))


#: the last characters of a place's name, never of a person's of three or more ("岳麓区", "铁西区")
_PLACE_ENDS = frozenset("区县市省镇乡村路街州")
#: a doubled character opening a clause: how children and pets are called ("豆豆", "乐乐")
_DOUBLED = re.compile(r"(?:^|(?<=[，,。！!？?；;\s]))(([\u4e00-\u9fff])\2)(?=[\u4e00-\u9fff])")
#: doubled words that are adverbs, kin words or sounds, not names
_NOT_DOUBLED_NAMES = frozenset(
    {"天天", "常常", "刚刚", "慢慢", "渐渐", "好好", "往往", "偷偷", "悄悄", "默默", "乖乖", "统统"}
    | {"哈哈", "呵呵", "嘿嘿", "嘻嘻", "明明", "多多", "久久", "早早", "大大", "小小", "白白", "足足"}
    | {"万万", "纷纷", "处处", "人人", "家家", "年年", "月月", "日日", "时时", "样样", "个个", "轻轻"}
    | {"静静", "紧紧", "深深", "满满", "整整", "匆匆", "连连", "频频", "屡屡", "仅仅", "恰恰", "偏偏"}
    | {"略略", "实实", "稍稍", "隐隐", "暗暗", "快快", "晚晚", "狠狠", "急急", "楚楚", "爸爸", "妈妈"}
    | {"哥哥", "姐姐", "弟弟", "妹妹", "爷爷", "奶奶", "宝宝", "叔叔", "姑姑", "舅舅", "婆婆", "公公"}
    | {"伯伯", "太太", "姥姥", "娃娃", "星星", "谢谢", "拜拜", "嗯嗯"}
)


@lru_cache(maxsize=4096)
def place_names(text: str) -> tuple[str, ...]:
    """The place names in Chinese ``text`` as jieba's part-of-speech tagger reads them (``ns``)."""
    if not any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return ()
    return tuple(pair.word for pair in _tagger().cut(text) if pair.flag == "ns" and pair.word not in _PLACE_WORDS)


#: common nouns the tagger reads as place names: the kind of a place, not one ("城市", "工作城市")
_PLACE_WORDS = frozenset({"城市", "城区", "市区", "郊区", "地区", "省份", "国家", "家乡", "老家", "地方", "附近", "本地", "外地"})


@lru_cache(maxsize=4096)
def leading_place(text: str) -> str:
    """The place name Chinese ``text`` opens with, as jieba's part-of-speech tagger reads place
    names (``ns``: "重庆渝北区了…" -> "重庆渝北区", "宜昌找份工作" -> "宜昌"), or a word of three
    characters or more that ends as a district does ("雨花区", which it tags n); "" without one."""
    place = ""
    for pair in _tagger().cut(text):
        # "雨花区" (tagged n) and "岳麓区" (nr) end as districts do: places too
        if pair.flag != "ns" and not (len(pair.word) >= 3 and pair.word[-1] in _DISTRICT_ENDS and "\u4e00" <= pair.word[0] <= "\u9fff"):
            break
        place += pair.word
    return place


#: the last character of a place's name the tagger may not know ("雨花区", "岳麓区")
_DISTRICT_ENDS = frozenset("区县市省镇乡村")


@lru_cache(maxsize=16384)
def english_word_classes(word: str) -> frozenset[str]:
    """The universal part-of-speech tags an English word can take out of context ("quiz" ->
    NOUN, VERB; "college" -> NOUN; "handed" -> VERB), from lemminflect's lexicon (a dependency:
    about 0.2 s to load, once per process). Empty for a word the lexicon does not know (a name, a
    coinage, "TikTok"): no class can be ruled out."""
    from lemminflect import getAllLemmas

    return frozenset(getAllLemmas(word.lower()))


@lru_cache(maxsize=4096)
def chinese_word_classes(text: str) -> tuple[tuple[str, str], ...]:
    """Each word of the text with jieba's part-of-speech flag ("嗓子" -> n, "冒烟" -> v, "一场" ->
    m): what a rule about word classes reads, out of context as jieba gives them."""
    return tuple((pair.word, pair.flag) for pair in _tagger().cut(text))


@lru_cache(maxsize=1)
def _tagger() -> Any:
    """jieba's part-of-speech tagger over the process's private tokenizer."""
    from jieba.posseg import POSTokenizer  # type: ignore[import-untyped]

    return POSTokenizer(_jieba())


@lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def _han_terms(run: str) -> list[str]:
    return [w for w in _jieba().cut_for_search(run, HMM=False) if w not in ZH_STOPWORDS]


def _word_terms(word: str) -> list[str]:
    """One word of a non-Chinese run as terms: none for a stopword, two for "don't" (do, not)."""
    base, _, clitic = word.replace("’", "'").partition("'")
    if clitic == "t" and base.endswith("n"):
        base = base[:-1]
        return [*_word_terms(_CONTRACTIONS.get(base, base)), "not"]
    if clitic and clitic not in _CLITICS:
        return [t for part in word.replace("’", "'").split("'") for t in _word_terms(part)]
    if base in EN_STOPWORDS:
        return []
    if base.isdigit():
        return [base.lstrip("0") or "0"]
    if base.isascii() and base.isalpha():
        return [_stem(base)]
    return [base]


def segment(text: str) -> list[str]:
    """Search terms of ``text`` in order (repeats kept: they count as term frequency)."""
    terms: list[str] = []
    for i, run in enumerate(_RUNS.split(unicodedata.normalize("NFKC", text).casefold())):
        if i % 2:  # the split's odd pieces are the Chinese runs
            terms += _han_terms(run)
        else:
            for word in _WORDS.findall(run):
                terms += _word_terms(word)
    return terms


def analyze_query(text: str) -> list[str]:
    """The distinct search terms of a query, in order: each counts once, however often it is asked."""
    return list(dict.fromkeys(segment(text)))
