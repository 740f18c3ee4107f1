"""Which new value replaces an old one: single-valued predicates, change cues, accumulate vs replace.

Users change their city, employer, job, deadlines and stacks, and they also use several tools and
like several things at once. A statement's predicate is first put in a canonical form (synonyms and
change words folded: "搬到"/"住在" -> "住在", "改用"/"使用"/"用" -> "使用", "moved to" -> "lives in"),
then:

- a single-valued predicate (where someone lives, works, their job, a date or deadline, a name, an
  age, a budget) keeps one current value: a new one supersedes it;
- any other predicate accumulates (uses, likes, knows, has, visited...) unless the evidence carries
  a change cue (改/换/搬/不再/已经…了/now/moved/switched/instead...): then the new value replaces
  the values the sentence names, or the current value when there is only one;
- a value the sentence marks as the old one ("从上海搬到深圳": 上海; "no longer uses X": X) is past
  from the start, whatever its predicate.

Pure functions, no I/O: the extractor applies them to entity attributes and graph relations.
"""

from __future__ import annotations

import re

from ..llm.grounding import normalize

#: predicate spellings -> the canonical predicate they mean (both languages)
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(("住在", "住", "居住在", "居住于", "住于", "居住", "家在", "定居在", "定居于", "定居", "搬到", "搬去", "搬往", "搬家到", "迁到", "迁往", "迁居", "居住地", "常住"), "住在"),
    **dict.fromkeys(("lives in", "live in", "living in", "lived in", "resides in", "moved to", "relocated to", "based in", "home city"), "lives in"),
    **dict.fromkeys(("工作于", "就职于", "任职于", "在职于", "供职于", "入职", "入职于", "跳槽到", "跳槽去", "工作单位", "雇主", "所在公司", "公司", "单位", "就职", "任职"), "工作单位"),
    **dict.fromkeys(("works at", "work at", "works for", "work for", "worked at", "employer", "company", "employed by", "employed at"), "works at"),
    **dict.fromkeys(("职业", "职位", "岗位", "工作是", "职业是", "担任", "身份", "头衔"), "职业"),
    **dict.fromkeys(("job", "occupation", "profession", "works as", "work as", "role", "position", "title", "job title"), "job"),
    **dict.fromkeys(("时间", "日期", "举行时间", "举办时间", "截止日期", "截止时间", "截止", "deadline", "改到", "改期到", "改期", "推迟到", "延期到", "延后到", "提前到", "定在", "安排在", "定于", "举行于", "举办于", "改在"), "时间"),
    **dict.fromkeys(("date", "time", "due", "due date", "scheduled for", "postponed to", "rescheduled to", "moved up to", "pushed to"), "date"),
    **dict.fromkeys(("使用", "用", "采用", "改用", "换用", "换成", "改成用", "用的是", "使用的是", "基于"), "使用"),
    **dict.fromkeys(("uses", "use", "using", "switched to", "built with", "runs on"), "uses"),
    **dict.fromkeys(("名字", "姓名", "名字是", "名叫", "叫", "叫做", "名为"), "名字"),
    **dict.fromkeys(("name", "is named", "named", "is called", "called", "name is"), "name"),
    **dict.fromkeys(("年龄", "岁数", "今年"), "年龄"),
    **dict.fromkeys(("age", "is aged"), "age"),
}

#: canonical predicates that hold one value at a time (besides the table, any predicate ending in
#: a date or time word)
SINGLE_VALUED = frozenset(
    normalize(p)
    for p in (
        "住在", "工作单位", "职业", "时间", "名字", "年龄", "生日", "出生日期", "预算", "身高", "体重", "电话", "手机号", "邮箱", "地址", "婚姻状况", "状态", "进度", "学历", "专业", "毕业于", "所在地", "上司", "老板", "负责人", "截止日期", "城市", "所在城市",
        "lives in", "works at", "job", "date", "name", "age", "birthday", "budget", "height", "weight", "phone", "email", "address", "status", "progress", "boss", "manager", "deadline", "major", "city", "location",
    )
)
_SINGLE_SUFFIXES = ("时间", "日期", "截止", "期限", "地点", "deadline", "date", " time", " due")

#: words that say the new value replaces the old ("我已经从上海搬到深圳了", "改用Go重写", "we switched to Go")
_CHANGE_CUES = re.compile(
    r"改用|改成|改为|改到|改在|改去|改期|换成|换到|换了|换用|换工作|搬到|搬去|搬家|搬了|迁到|迁往|不再|不用了|跳槽|推迟|延期|延后|提前到|变成|变为|转到|转行|离职|辞职|已经[^，。！？,.!?；;]*了"
    r"|\b(?:now|moved|switched|instead|no longer|any ?more|changed|relocated|postponed|rescheduled|pushed back|quit|left|new job)\b",
    re.IGNORECASE,
)
#: a value right after these is the old one ("从上海搬到深圳", "from Java to Go", "不再使用Java")
_OLD_BEFORE = r"(?:从|以前在|之前在|原来在|原先在|以前用|之前用|原来用|不再使用|不再用|不用|\bfrom\b|\bno longer (?:uses?|lives? in|works? (?:at|for))\b|\bused to (?:use|live in|work at|work for)\b|\bformerly\b)\s*"
#: cue words a predicate carries that say nothing about which predicate it is
_PREDICATE_CUES = re.compile(r"^(?:已经|现在|目前|如今|重新|也|还|改|换|新)|了$|^(?:now|currently|also) ", re.IGNORECASE)


def canonical(predicate: str) -> str:
    """The predicate a spelling means: its synonym group's name, else itself with change words
    removed ("已经搬到" -> "住在", "改用" -> "使用"), else the spelling as given (stripped)."""
    text = predicate.strip()
    n = normalize(text)
    for candidate in (n, _PREDICATE_CUES.sub("", n).strip()):
        if candidate in SYNONYMS:
            return SYNONYMS[candidate]
    return text


def single_valued(predicate: str) -> bool:
    """Whether the (canonical) predicate holds one value at a time."""
    n = normalize(canonical(predicate))
    return n in SINGLE_VALUED or n.endswith(_SINGLE_SUFFIXES)


def change_cue(sentence: str) -> bool:
    """Whether the sentence says something changed (a move, a switch, a postponement, "no longer")."""
    return bool(_CHANGE_CUES.search(normalize(sentence)))


def said_as_old(value: str, sentence: str) -> bool:
    """Whether the sentence says a change and names ``value`` as the one left behind ("从上海搬到
    深圳" for 上海; "从北京出发" says no change, so 北京 is not old)."""
    v = normalize(value)
    return bool(v) and change_cue(sentence) and re.search(_OLD_BEFORE + re.escape(v), normalize(sentence)) is not None


def replaced(predicate: str, sentence: str, current: list[str], new: str) -> list[str]:
    """Which of the ``current`` values a new value said in ``sentence`` replaces: all of them for a
    single-valued predicate; with a change cue, those the sentence names (the only one when it
    names none and there is one); otherwise none (the values accumulate)."""
    others = [c for c in current if normalize(c) != normalize(new)]
    if single_valued(predicate):
        return others
    if not change_cue(sentence):
        return []
    s = normalize(sentence)
    named = [c for c in others if normalize(c) in s]
    # a cue naming none of several values does not say which one it replaces ("缓存改用Memcached"
    # beside SpringBoot and Redis): keep them all rather than lose the wrong one
    return named or (others if len(others) == 1 else [])
