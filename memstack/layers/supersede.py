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

A change verb before a noun ("换导师", "新工作", "new job") is that noun's predicate said as a change
(``changed_noun``): the value is its new one. The cue replaces what the change's own clause names
("把Hive换成了Iceberg，Airflow还在用": Hive, not Airflow), and a value that says a change itself
("地点改到重庆" under 计划) replaces only what it names.

Pure functions, no I/O: the extractor applies them to entity attributes and graph relations when
it writes, and the read side (``settle``) to what is stored, so a value an older statement
replaced because it was applied later, or two current values of a single-valued predicate that
were written under spellings of one predicate, are shown as the rule says: the newest current.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..llm.grounding import normalize

T = TypeVar("T")

#: predicate spellings -> the canonical predicate they mean (both languages)
SYNONYMS: dict[str, str] = {
    **dict.fromkeys(
        (
            "住在",
            "住",
            "居住在",
            "居住于",
            "住于",
            "居住",
            "家在",
            "定居在",
            "定居于",
            "定居",
            "搬到",
            "搬去",
            "搬往",
            "搬家到",
            "迁到",
            "迁往",
            "迁居",
            "居住地",
            "常住",
            "现居",
            "现居于",
            "现住",
            "住到",
            "搬进",
            "搬至",
            "搬迁到",
            "搬迁至",
            "迁至",
            "迁居到",
            "移居",
            "移居到",
            "移居至",
            "搬回",
            "新家",
            "新家在",
        ),
        "住在",
    ),
    **dict.fromkeys(
        (
            "lives in",
            "live in",
            "living in",
            "lived in",
            "lives",
            "lived",
            "resides in",
            "moved to",
            "relocated to",
            "based in",
            "home city",
        ),
        "lives in",
    ),
    **dict.fromkeys(
        (
            "工作于",
            "就职于",
            "任职于",
            "在职于",
            "供职于",
            "入职",
            "入职于",
            "跳槽到",
            "跳槽去",
            "工作单位",
            "雇主",
            "所在公司",
            "公司",
            "单位",
            "就职",
            "任职",
        ),
        "工作单位",
    ),
    **dict.fromkeys(
        ("works at", "work at", "works for", "work for", "worked at", "employer", "company", "employed by", "employed at"), "works at"
    ),
    **dict.fromkeys(("职业", "职位", "岗位", "工作是", "职业是", "担任", "身份", "头衔"), "职业"),
    **dict.fromkeys(("job", "occupation", "profession", "works as", "work as", "role", "position", "title", "job title"), "job"),
    **dict.fromkeys(
        (
            "时间",
            "日期",
            "举行时间",
            "举办时间",
            "截止日期",
            "截止时间",
            "截止",
            "deadline",
            "改到",
            "改期到",
            "改期",
            "推迟到",
            "延期到",
            "延后到",
            "提前到",
            "定在",
            "安排在",
            "定于",
            "举行于",
            "举办于",
            "改在",
        ),
        "时间",
    ),
    **dict.fromkeys(
        ("date", "time", "due", "due date", "scheduled for", "postponed to", "rescheduled to", "moved up to", "pushed to"), "date"
    ),
    **dict.fromkeys(("使用", "用", "采用", "改用", "换用", "换成", "改成用", "用的是", "使用的是", "基于"), "使用"),
    **dict.fromkeys(("uses", "use", "using", "switched to", "built with", "built on", "written in", "runs on", "migrated to"), "uses"),
    **dict.fromkeys(("名字", "姓名", "名字是", "名叫", "叫", "叫做", "名为", "改名", "改名为", "改名叫"), "名字"),
    **dict.fromkeys(("name", "is named", "named", "is called", "called", "name is"), "name"),
    **dict.fromkeys(("年龄", "岁数", "今年"), "年龄"),
    **dict.fromkeys(("age", "is aged"), "age"),
}

#: canonical predicates that hold one value at a time (besides the table, any predicate ending in
#: a date or time word)
SINGLE_VALUED = frozenset(
    normalize(p)
    for p in (
        "住在",
        "工作单位",
        "职业",
        "时间",
        "名字",
        "年龄",
        "生日",
        "出生日期",
        "预算",
        "身高",
        "体重",
        "电话",
        "手机号",
        "邮箱",
        "地址",
        "婚姻状况",
        "状态",
        "进度",
        "学历",
        "专业",
        "毕业于",
        "所在地",
        "上司",
        "老板",
        "负责人",
        "截止日期",
        "城市",
        "所在城市",
        "lives in",
        "works at",
        "job",
        "date",
        "name",
        "age",
        "birthday",
        "budget",
        "height",
        "weight",
        "phone",
        "email",
        "address",
        "status",
        "progress",
        "boss",
        "manager",
        "deadline",
        "major",
        "city",
        "location",
    )
)
_SINGLE_SUFFIXES = ("时间", "日期", "截止", "期限", "地点", "deadline", "date", " time", " due")

#: words that say the new value replaces the old ("我已经从上海搬到深圳了", "改用Go重写", "we switched to Go")
_CHANGE_CUES = re.compile(
    r"改用|改成|改为|改到|改在|改去|改期|换成|换到|换了|换用|换工作|换[\u3400-\u9fff]{1,4}了|搬到|搬去|搬家|搬了|迁到|迁往|不再|不用了|跳槽|推迟|延期|延后|提前到|变成|变为|转到|转行|离职|辞职|已经[^，。！？,.!?；;]*了"
    r"|\b(?:now|moved|switched|instead|no longer|any ?more|changed|relocated|postponed|rescheduled|pushed back|quit|left|new job)\b",
    re.IGNORECASE,
)
#: a value right after these is the old one ("从上海搬到深圳", "from Java to Go", "不再使用Java")
_OLD_BEFORE = r"(?:从|以前在|之前在|原来在|原先在|以前用|之前用|原来用|不再使用|不再用|不用|\bfrom\b|\bno longer (?:uses?|lives? in|works? (?:at|for))\b|\bused to (?:use|live in|work at|work for)\b|\bformerly\b)\s*"
#: cue words a predicate carries that say nothing about which predicate it is ("已经搬到了",
#: "上个月刚搬到", "从上海搬到": the old value before a move verb, "now lives in")
_PREDICATE_CUES = re.compile(
    r"^(?:已经|已|现在|目前|如今|现|当前|重新|也|还|又|再|改|换|新|刚刚|刚|最近|近来|后来|之后|随后|终于|正式|一直|全家|上个月|上周|去年|今年|前不久)"
    r"|^从.{1,12}?(?=搬|迁|移居|跳槽|调|转|换|改)|(?:了|过|着)$"
    r"|^(?:now|currently|also|recently|just|already|later|finally) ",
    re.IGNORECASE,
)
#: a predicate that says something is not (or no longer) so is not a spelling of the one it negates
_NEGATED = re.compile(r"不|没|未|别|\b(?:not|no longer|never|don't|doesn't|didn't|stopped|quit)\b", re.IGNORECASE)
#: a change verb before a noun: the predicate names what changed, and the noun is the predicate
#: ("换导师" -> 导师, "新工作" -> 工作, "new job" -> job): the value is the new one of that noun
_CHANGE_PREFIX = re.compile(
    r"^(?:(?:已经|已|也|又|刚刚|刚|最近)?(?:更换了?|变更了?|换了|改了|换|改|新的|新)(?=[\u3400-\u9fff]))|^(?:(?:a|my|the) )?(?:new|changed(?: (?:my|his|her|their|the))?|switched(?: (?:my|his|her|their|the))?) ",
    re.IGNORECASE,
)


def canonical(predicate: str) -> str:
    """The predicate a spelling means: its synonym group's name, else itself with change and time
    words removed ("已经搬到了" -> "住在", "上个月刚搬到" -> "住在", "改用" -> "使用"), else the
    spelling as given (stripped). A negated spelling ("不再住在") is never the predicate it negates."""
    text = predicate.strip()
    n = normalize(text)
    if n in SYNONYMS:
        return SYNONYMS[n]
    if _NEGATED.search(n):
        return text
    candidate = n
    for _ in range(4):  # "上个月刚从上海搬到了": the cues one after another
        shorter = _PREDICATE_CUES.sub("", candidate).strip()
        if shorter in SYNONYMS:
            return SYNONYMS[shorter]
        if shorter == candidate or not shorter:
            break
        candidate = shorter
    noun = changed_noun(n)
    if noun:
        return SYNONYMS.get(noun, noun)
    return text


#: a group's name in the other language, where a predicate has one in each: a user who writes in
#: both has one city, one employer, one job ("I'm in Vancouver now" after "住在雨花区")
ACROSS = {"lives in": "住在", "works at": "工作单位", "job": "职业", "name": "名字", "age": "年龄"}


def kind(predicate: str) -> str:
    """``canonical``, one name for both languages where the group has a spelling in each ("lives
    in" and "住在" are 住在): what two values must share to be one attribute's, or to replace one
    another. The key a value is written under stays in its own language."""
    c = canonical(predicate)
    return ACROSS.get(normalize(c), c)


def changed_noun(predicate: str) -> str:
    """The noun a predicate says changed ("换导师", "换了导师", "新工作", "new job", "changed jobs"), or
    "" when it is no change verb before a noun. The noun is a property or a role of two characters
    or more in Chinese, not a verb phrase ("改变", "换算", "改进算法", "换成Go" are not one)."""
    from ..llm.extract import _noun_predicate

    n = normalize(predicate).strip()
    m = _CHANGE_PREFIX.match(n)
    if not m:
        return ""
    rest = n[m.end() :].strip().removesuffix("了").strip()
    if rest.isascii():
        singular = rest[:-1] if rest.endswith("s") and not rest.endswith("ss") and rest[:-1] in SYNONYMS else rest
        return singular if singular in SYNONYMS or _noun_predicate(singular, "en") else ""
    return (
        rest
        if rest in SYNONYMS or (len(rest) >= 2 and rest[0] not in _VERB_AFTER_CHANGE and (_noun_predicate(rest, "zh") or len(rest) <= 3))
        else ""
    )


#: what follows 换/改/新 when they are a verb of their own, not a change of a noun ("改进", "换成",
#: "改用", "新买的"): the words after them are a verb phrase, not an attribute's name
_VERB_AFTER_CHANGE = set("用成为到在去掉了写进善变正造开装做学买来回过好掉")


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


def replaced(
    predicate: str, sentence: str, current: list[str], new: str, *, cue: bool = False, evidence: dict[str, str] | None = None
) -> list[str]:
    """Which of the ``current`` values a new value said in ``sentence`` replaces: all of them for a
    single-valued predicate; with a change cue (in the sentence, or ``cue``: the predicate itself
    said the change, "换导师"), those the change's own clause names (the only one when it names
    none and there is one; else the one whose own words, in ``evidence``: value -> the sentence
    it was said in, name what the change names before its cue: "缓存改用Memcached了" replaces
    Redis of "…，缓存使用Redis", not SpringBoot of "后端使用SpringBoot"); otherwise none (the
    values accumulate). A value that says a change itself ("婚礼推迟到明年5月", "地点改到重庆" under
    计划) is a statement of its own: it replaces only the values its clause names."""
    others = [c for c in current if normalize(c) != normalize(new)]
    if single_valued(predicate):
        return [c for c in others if not one_place(c, new, sentence)]
    if not (cue or change_cue(sentence)):
        return []
    s = normalize(sentence)
    clauses = [c for c in re.split(r"[，,；;。！？!?\n]|\.(?=\s|$)", s) if c.strip()]
    said = [c for c in clauses if change_cue(c)] or ([c for c in clauses if normalize(new) in c] if cue else [])
    named = [c for c in others if any(normalize(c) in clause for clause in said) or said_as_old(c, sentence)]
    if change_cue(new):
        return named
    if named or len(others) == 1:
        return named or others
    # a cue naming none of several values ("缓存改用Memcached" beside SpringBoot and Redis): the one
    # whose own clause names the change's topic, when exactly one does; else keep them all rather
    # than lose the wrong one
    topics = [t for t in (_topic(c) for c in said) if t]
    if not topics or not evidence:
        return []
    hit = [c for c in others if any(t in clause for t in topics for clause in _clauses_with(evidence.get(c, ""), c))]
    return hit if len(hit) == 1 else []


#: a value that names a part of a place: a district, a county, a town
_PART_OF_PLACE = re.compile(r"(?:区|县|镇|乡|街道|村|\bdistrict|\bcounty|\bborough)$", re.IGNORECASE)


def one_place(a: str, b: str, sentence: str) -> bool:
    """Whether values ``a`` and ``b`` name one place at two scales in one ``sentence`` ("从成都搬到
    杭州了，现在住在西湖区": 杭州 and 西湖区; "搬到杭州余杭了": 杭州 and 杭州余杭), neither said as the old
    one: the one does not replace the other. Decision: by the sentence and a district's suffix or
    one name holding the other, not a gazetteer; without it a question about the city found only
    the district."""
    x, y, s = normalize(a), normalize(b), normalize(sentence)
    return bool(
        x
        and y
        and x in s
        and y in s
        and (_PART_OF_PLACE.search(x) or _PART_OF_PLACE.search(y) or x in y or y in x)  # "杭州" of "杭州余杭"
        and not said_as_old(a, sentence)
        and not said_as_old(b, sentence)
    )


def replaced_items(
    predicate: str,
    sentence: str,
    items: Sequence[T],
    new: str,
    value_of: Callable[[T], str],
    words_of: Callable[[T], str],
    *,
    cue: bool = False,
) -> list[T]:
    """The ``items`` whose value (``value_of``) a new value said in ``sentence`` replaces, by
    ``replaced`` with each item's own words (``words_of``) as its evidence."""
    gone = {
        normalize(v)
        for v in replaced(
            predicate, sentence, [value_of(i) for i in items], new, cue=cue, evidence={value_of(i): words_of(i) for i in items}
        )
    }
    return [i for i in items if normalize(value_of(i)) in gone]


#: words before a change cue that say who or when, not what changed ("我们把", "现在", "已经")
_TOPIC_NOISE = re.compile(
    r"^(?:(?:我们|我|咱们|他们|他|她|公司|团队|现在|目前|已经|最近|也|又|都|就|还|把|将)+)|(?:把|将|也|又|都|已经|现在|就)+$|\b(?:we|i|our|my|the|have|has|now|also|just)\b",
    re.IGNORECASE,
)


def _topic(clause: str) -> str:
    """What a change clause names before its cue ("缓存" of "缓存改用memcached了"; "" when only a
    subject or a time is there)."""
    m = _CHANGE_CUES.search(clause)
    head = _TOPIC_NOISE.sub("", clause[: m.start()] if m else "").strip()
    return head if (len(head) >= 2 if not head.isascii() else len(head) >= 3) else ""


def _clauses_with(sentence: str, value: str) -> list[str]:
    """The clauses of ``sentence`` (normalised) that hold ``value``."""
    v = normalize(value)
    return [c for c in re.split(r"[，,；;。！？!?\n]|\.(?=\s|$)", normalize(sentence)) if v and v in c]


def says_change(predicate: str) -> bool:
    """Whether a predicate itself says the change ("换导师", "改用", "switched to", "推迟到"): its
    value is the new one, never an old value a cessation in its sentence ends."""
    n = normalize(predicate)
    return bool(changed_noun(n)) or bool(
        re.search(
            r"改名|新家|改用|改成|改为|改到|改在|换成|换到|换用|搬到|搬去|搬家到|迁到|迁往|推迟到|延期到|延后到|提前到|转到|转行|跳槽|变成|变为|入职|加入|\b(?:switched to|changed to|moved to|moved up to|postponed to|pushed (?:back )?to|rescheduled to|relocated to|migrated to|now)\b",
            n,
        )
    )


def instant(stamp: Any) -> datetime | None:
    """A stored time (an ISO string or a datetime) as an aware datetime; None when it is none."""
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _said_at(value: dict[str, Any]) -> int:
    """Where a stored value stands in the words it came from (its ``evidence``); 0 without them."""
    at = normalize(str(value.get("evidence") or "")).find(normalize(str(value.get("value", ""))))
    return max(at, 0)


def settle(predicate: str, current: list[dict[str, Any]], past: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stored values (``{"value", "valid_from", ...}``, past ones with ``"until"``) as the rule says
    they stand, whatever order they were written in. For a single-valued predicate: a past value
    that was replaced before it was said (``until`` before its ``valid_from``: an older statement
    of the same batch applied after it) is current again, and of several current values (written
    under two spellings of the predicate, or so restored) the newest said is current, the others
    past from when it was said, but for one that names the same place at another scale, said with
    it (``one_place``: 杭州 beside 西湖区); values said at one time are in the order their words
    say them. Other predicates' values are as stored. Returns new lists: the current values
    oldest first, the past ones by when they ended."""
    current = [dict(c) for c in current]
    past = [dict(p) for p in past]
    if not single_valued(predicate):
        return current, past
    for p in list(past):
        start, end = instant(p.get("valid_from")), instant(p.get("until"))
        if start and end and end < start:
            past.remove(p)
            current.append({k: v for k, v in p.items() if k != "until"})
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    # said at one time: in the order the words say them ("搬到杭州了，现在住在西湖区": 杭州 first)
    current.sort(key=lambda c: (instant(c.get("valid_from")) or epoch, _said_at(c)))
    if len({normalize(str(c.get("value", ""))) for c in current}) > 1:
        newest = current[-1]
        value = normalize(str(newest.get("value", "")))

        def stays(c: dict[str, Any]) -> bool:  # one place at two scales, said together
            return c.get("valid_from") == newest.get("valid_from") and one_place(
                str(c.get("value", "")), str(newest.get("value", "")), str(newest.get("evidence") or "")
            )

        kept = [c for c in current[:-1] if normalize(str(c.get("value", ""))) != value and stays(c)]
        for c in current[:-1]:
            if normalize(str(c.get("value", ""))) != value and c not in kept:
                past.append({**c, "until": newest.get("valid_from") or c.get("valid_from")})
        current = kept + [c for c in current if normalize(str(c.get("value", ""))) == value][-1:]
    now = {normalize(str(c.get("value", ""))) for c in current}
    past = [p for p in past if normalize(str(p.get("value", ""))) not in now]
    past.sort(key=lambda p: instant(p.get("until")) or epoch)
    return current, past
