"""Which of the user's facts a question needs: the words a question can name something with, how
many of them a fact shares, and the two kinds of fact shown even unnamed (who the user is, and for a
question about now or before, what changed). Shared by the entity and graph sections, so that the
two show the same facts for one question."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ..text import segment

#: attributes that say who the user is (a short key): shown in the profile whatever the question
IDENTITY = re.compile(
    r"名|叫|姓|职业|工作|上班|职位|身份|住|家乡|老家|城市|年龄|生日|出生|^是$|\b(?:name|called|job|work|works|occupation|role|lives?|home|city|age|born|birthday|is)\b",
    re.IGNORECASE,
)
IDENTITY_KEY_CHARS = 6
#: question words that name no subject ("我现在住在哪里？": 现在)
_UNSPECIFIC = frozenset({"现在", "目前", "如今", "以前", "之前", "最近", "时候", "now", "currently", "still"})


#: words of a question about now, about before, and about whether something still holds ("还" before
#: a verb in a yes-no question: "我现在还喝咖啡吗？"; not "还有什么…")
_NOW_WORDS = r"现在|目前|眼下|如今|当前|最新|\b(?:now|currently|current|these days|nowadays|latest)\b"
_BEFORE_WORDS = r"以前|之前|原来|原先|过去|曾经|\b(?:before|previously|used to|formerly)\b"
_STILL_WORDS = r"还在|还是|仍然|依然|还(?!有什么|有哪些|有别的|要什么|可以|能不能|需要)(?=[\u4e00-\u9fff][^？?]*(?:吗|嘛|(?<![什怎那这多])么)[？?]?\s*$)|\b(?:still|anymore|any more)\b"
_NOW = re.compile(_NOW_WORDS, re.IGNORECASE)
_BEFORE = re.compile(_BEFORE_WORDS, re.IGNORECASE)
#: a question about how things stand now or stood before: where what changed is worth showing
_NOW_OR_BEFORE = re.compile(f"{_NOW_WORDS}|{_BEFORE_WORDS}|{_STILL_WORDS}", re.IGNORECASE)


def asks_about_before(query: str) -> bool:
    """Whether the question asks how things stood before and not how they stand now ("我以前在哪家
    公司做前端？", "Where did I live before?"): a value that is only current answers nothing there."""
    return bool(_BEFORE.search(query)) and not _NOW.search(query)


def asks_about_change(query: str) -> bool:
    """Whether the question asks how things stand now or stood before ("我现在住在哪里？", "我以前在
    哪家公司？", "Do I still ...?"): the user's changed facts are shown for it even unnamed."""
    return bool(_NOW_OR_BEFORE.search(query))


_STILL = re.compile(_STILL_WORDS, re.IGNORECASE)


def asks_about_now_only(query: str) -> bool:
    """Whether the question asks how things stand now, and not whether something still holds or
    how it stood before ("我现在怎么锻炼？", "Where do I live now?"; not "我还去健身房吗？"): a value
    that ended with nothing known in its place answers nothing there, and the small model read
    "练=（目前未知；此前：力量）" as the answer (the fact set's "我现在怎么锻炼？")."""
    return bool(_NOW.search(query)) and not _BEFORE.search(query) and not _STILL.search(query)


_DAY = re.compile(
    r"哪一天|哪天|哪一日|几月几[号日]|几号|什么日子|哪个日期|什么日期|具体日期|\b(?:what|which) (?:day|date)\b|\bon what date\b|\bwhen exactly\b",
    re.IGNORECASE,
)


def asks_for_a_day(query: str) -> bool:
    """Whether the question asks on which day something happened ("我去做膝盖核磁共振是哪一天？",
    "What date did I ...?"). The model-made sections date each fact by the day it was *said*; beside
    such a question the local model answered that day ("上周六" said on 01-27 answered 01-27, see
    BENCHMARKS.md, LifeAssist-CN), so for it they show no said-on dates, only the quotes with their
    relative dates resolved ("上周六（2026-01-24）"). "什么时候" ("我一般什么时候打网球？") asks a
    habit as often as a day and is not counted."""
    return bool(_DAY.search(query))


def query_terms(query: str) -> list[str]:
    """The question's words that can name something (not "现在", "now")."""
    return [t for t in dict.fromkeys(segment(query)) if t not in _UNSPECIFIC]


#: the words for the user's people in each language, so that "我老婆是做什么的？" names the
#: "wife=Chen Yu" the user said in English, and "my sister" the 妹妹 said in Chinese (a question and
#: its facts are often in two languages: see BENCHMARKS.md, the translated questions)
KIN_ACROSS: dict[str, tuple[str, ...]] = {
    "wife": ("老婆", "妻子", "太太", "爱人", "媳妇"),
    "husband": ("老公", "丈夫", "爱人"),
    "son": ("儿子",),
    "daughter": ("女儿", "闺女"),
    "kid": ("孩子",),
    "kids": ("孩子",),
    "mom": ("妈妈", "母亲", "妈"),
    "mum": ("妈妈", "母亲", "妈"),
    "mother": ("妈妈", "母亲", "妈"),
    "dad": ("爸爸", "父亲", "爸"),
    "father": ("爸爸", "父亲", "爸"),
    "parents": ("父母", "爸妈"),
    "sister": ("姐姐", "妹妹"),
    "brother": ("哥哥", "弟弟"),
    "boss": ("老板", "上司", "领导"),
    "manager": ("经理", "领导"),
    "girlfriend": ("女朋友", "女友"),
    "boyfriend": ("男朋友", "男友"),
    "partner": ("对象", "爱人"),
    "roommate": ("室友",),
    "colleague": ("同事",),
    "coworker": ("同事",),
    "friend": ("朋友",),
    "neighbor": ("邻居",),
    "neighbour": ("邻居",),
    "teacher": ("老师",),
    "cousin": ("表哥", "表姐", "表弟", "表妹", "堂哥", "堂姐", "堂弟", "堂妹"),
    "grandma": ("奶奶", "外婆", "姥姥"),
    "grandpa": ("爷爷", "外公", "姥爷"),
}


@lru_cache(maxsize=1)
def _kin_words() -> dict[str, tuple[str, ...]]:
    """Each kin word, as ``segment`` spells it (an English stem: "roommat"), and its translations."""
    out: dict[str, tuple[str, ...]] = {}
    for en, zh in KIN_ACROSS.items():
        stem = segment(en)[0]
        out[stem] = (*out.get(stem, ()), *zh)
        for w in zh:
            out[w] = (*out.get(w, ()), stem)
    return out


def translations(words: set[str]) -> set[str]:
    """The other language's words (as ``segment`` spells them) for the kin words among ``words``."""
    kin = _kin_words()
    return {t for w in words for t in kin.get(w, ())}


def shared_terms(terms: Sequence[str], text: str) -> int:
    """How many of ``terms`` the text holds: as words, as Chinese characters of its words (a one-character term), or
    as a substring (a longer term); a kin word also in the other language ("wife" holds 老婆)."""
    have = set(segment(text))
    have |= translations(have)
    have |= {c for t in have for c in t if "\u3400" <= c <= "\u9fff"}
    return sum(1 for t in terms if t in have or (len(t) > 1 and t in text))


def mentions_terms(query: str, text: str) -> bool:
    """Whether ``text`` shares a term with the question (``shared_terms``)."""
    return shared_terms(query_terms(query), text) > 0


#: a question about the user's own name, where their other names are worth a line (not "我养的那只
#: 柴犬叫什么名字？")
_ASKS_NAME = re.compile(
    r"我(?:的)?(?:名字|姓名|全名|叫什么|叫啥|姓什么)|(?:怎么|如何)称呼我|\bmy (?:full |real )?name\b|\bwhat am i called\b|\bwho am i\b",
    re.IGNORECASE,
)


def asks_own_name(query: str | None) -> bool:
    """Whether the question asks the user's own name: only then are the user's names (an alias, "是=钟一鸣",
    "用户 —是→ 钟一鸣") worth a line; beside another question a right but idle line changed the
    small model's answer ("我女朋友在哪个城市？" answered from another turn, LifeAssist-CN)."""
    return bool(query and _ASKS_NAME.search(query))


#: a question about what the assistant said ("你当时建议我…", "你教了我什么…", "what did you suggest")
_ASKS_WHAT_YOU_SAID = re.compile(
    r"你(?:之前|以前|上次|当时|那时|曾经)?(?:建议|推荐|提议|教|告诉|提醒|给我定|帮我定|说过)"
    r"|\b(?:did|have) you (?:suggest|recommend|tell|say|advise|propose)|\byou (?:suggested|recommended|told me|said|advised|proposed)\b",
    re.IGNORECASE,
)


def asks_what_you_said(query: str | None) -> bool:
    """Whether the question asks what the assistant said or suggested: its answer is the
    assistant's own words, which retrieval finds; the model-made facts about the user are left
    out for it (beside "你建议我保留一款多少钱的实惠面？" the profile line 开=面馆 turned the
    answer from "保留12元的素面" into "12元", LifeAssist-CN)."""
    return bool(query and _ASKS_WHAT_YOU_SAID.search(query))
