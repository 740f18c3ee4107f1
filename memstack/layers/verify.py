"""Is a statement the model wrote what the user said? Checked against the user's own words before
anything is stored; a statement that fails is dropped with its reason (``Rejected``), one that
only needs its predicate tidied is corrected. A wrong memory is worse than none: when in doubt,
drop.

A statement ``subject|predicate|object`` passes when a sentence of the user's own turns (never
the assistant's: its suggestions and questions are not the user's facts)

- says the object (its words or characters, in the clause that says it);
- says the predicate: the words' own verb or relation (the extraction prompt asks for it), or
  another spelling of it (``SYNONYMS``: "搬到" for 住在), as a word of its own ("四" of "下周四" is
  none), or one of the few category names a profile may use unsaid (职业, 爱好, 宠物...). What
  the small model wrote instead ("用户|住在|曲江" of "我看中的是曲江那边一个铺面", "用户|猫搬家|麻薯",
  "用户|是|研二") was most of what it stored wrongly on LifeAssist-CN;
- says it of the subject: the subject (or a pronoun after it, in the same turn) is the nearest
  name before the object; for the user, the nearest is "我/I/my…" or no name at all (Chinese
  drops the subject), never someone else ("我妹妹住在杭州" is not the user's city, "星图项目使用
  Kafka" is not the user's stack);
- with the predicate's polarity: a negation before the object ("不再做数据分析", "no longer uses")
  that the predicate lacks ends the value (``past``) when it is a cessation, and drops the
  statement otherwise ("不喜欢香菜" written as 喜欢); a negation, like or dislike in the predicate
  that the sentence does not say drops it ("不再做数据分析" written "用户|不喜欢|数据分析", a real one);
- not as a question ("要不要用Redis？") nor a hypothetical ("如果搬到杭州…"); a plan ("打算明年
  搬到杭州") is kept as a plan: its predicate carries the plan word, so it never stands as the
  current value ("打算搬到=杭州", not "住在=杭州").

Predicates are tidied: time words are not part of a relation ("上个月（2026年4月）搬到" -> "搬到";
"以前住" -> "住", past); a predicate that swallowed its own value ("住在上海|招商银行", a real one)
is split back ("住在|上海") and the object it was given dropped.

Before its words are checked a statement is put in the shape of a relation (``shape``): a
predicate that is a stretch of the user's words said apart from its object ("做前端开发|React" of
"…做前端开发，主要写React") is split into its verb and value, one with a count in it ("每周去三次",
"开一辆白色的思域") loses the count or is dropped; an object that lists values ("Spark、Airflow和Hive")
is one statement each; an object that is a clause, a bare verb or a time adverb, a predicate that
is only a time word ("next|Tuesday"), and a subject that is its own object are dropped. A
negation or cessation bears only on what it governs, the object right after it ("不再做数据分析";
not "quit smoking in February": the date is when; not the next sentence's new value).

``cessations`` reads what the user's turns end, whether or not the model wrote a statement for
it ("已经不去健身房了", "I quit smoking", "卡罗拉卖给了我表弟", "从MySQL迁移到了TiDB"); the extractor
ends every current value of the owner that one names (``ends_value``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..budget import split_text
from ..llm.extract import Statement
from ..llm.grounding import normalize, overlap
from ..text import SURNAMES, chinese_word_classes, english_word_classes, person_names, place_names, word_spans
from ..types import Message
from .names import SELF_KEY, entity_key, is_alias, stem
from .relevance import translations
from .supersede import SYNONYMS, canonical, change_cue

#: words that name the speaker
#: the user: 我 and its dialect spellings (俺, 阿拉 in Shanghai; 额 in Shaanxi, not the 额 of 额头, 金额, 名额)
_SELF = re.compile(
    r"我|俺|咱|本人|阿拉|(?<![金名限份超差余定配数总税票面])额(?![头外度])|\b(?:i|i'm|i've|i'd|me|my|mine|myself|we|our|us)\b"
)
#: people a user speaks of as theirs: "我妹妹", "my wife": what follows is theirs, not the user's
_KIN = (
    "妹妹|姐姐|哥哥|弟弟|老婆|妻子|太太|爱人|丈夫|老公|女朋友|男朋友|女友|男友|爸爸|妈妈|父亲|母亲|爸|妈|儿子|女儿|孩子|老板|上司|领导|经理|同事|朋友|室友|"
    "邻居|老师|同学|表妹|表姐|表哥|表弟|堂妹|堂姐|堂哥|堂弟|爷爷|奶奶|外公|外婆|叔叔|阿姨|舅舅|姑姑|侄子|侄女|外甥女|外甥|孙子|孙女|"
    "爸妈|父母|岳父|岳母|公公|婆婆|媳妇|对象|闺女|闺蜜|哥们|兄弟|家人|亲戚|老伴儿|老伴|老汉|老娘|老爹|老妈|老爸|阿妈|阿爸|家姐|细佬|"
    "小舅子|小姨子|大舅子|姐夫|妹夫|嫂子|弟媳|儿媳|女婿|外孙女|外孙|娘|爹|哥|姐|弟|妹|"
    r"\b(?:wife|husband|sister|brother|mom|mum|mother|dad|father|son|daughter|kid|kids|boss|manager|friend|colleague|coworker|partner|girlfriend|boyfriend|roommate|neighbou?r|teacher|mate|nephew|niece|parents|grandma|grandpa|cousin)\b"
)
#: a kin word of two characters or more that opens a clause with no "我" before it: the clause's
#: subject ("爸妈年纪大了，现在在家带我侄子": 爸妈 带, not the user)
_BARE_KIN = re.compile(
    r"(?:^|(?<=[，,；;。！!？?\s]))(?:"
    + "|".join(k for k in _KIN.split("|") if len(k) >= 2 and not k.isascii() and "\\" not in k)
    + r")(?=[\u3400-\u9fff])"
)
_OTHER_PERSON = re.compile(
    rf"(?:我的?|俺的?|咱的?|阿拉|\bmy\s+|\bour\s+)(?:{_KIN})|(?:他|她|它|他们|她们|佢|\bhe\b|\bshe\b|\bthey\b|\bhis\b|\bher\b|\btheir\b)"
)
#: a kin word just before a name: the name is that person's ("我妹妹小雨")
_ENDS_WITH_KIN = re.compile(rf"(?:{_KIN})$")
_PRONOUN = re.compile(r"他|她|它|佢|\bhe\b|\bshe\b|\bit\b|\bthey\b|\bhis\b|\bher\b|\bits\b|\btheir\b")
#: what ends a clause: Chinese and English punctuation, an English full stop before a space ("I also
#: left nursing. I'm now a data analyst": the cessation is the sentence before's, not this one's)
#: a space between two Chinese characters, or after a Latin word written onto Chinese ("总监Vivian
#: 以前是老周"; not "在 Google 工作", spaced on both sides): the comma of voice input and chat
_CHAT_COMMA = (
    r"(?=\s)(?:"
    + "|".join([r"(?<=[\u3400-\u9fff])"] + [rf"(?<=[\u3400-\u9fff][A-Za-z0-9]{{{n}}})" for n in range(1, 16)])
    + r")\s+(?=[\u3400-\u9fff])"
)
_CLAUSE = re.compile(
    r"[，,；;：:。！？!?\n]|" + _CHAT_COMMA + "|"
    r"(?<!\b[a-z])(?<!\bst)(?<!\bdr)(?<!\bmr)(?<!\bms)(?<!\bjr)(?<!\bsr)(?<!\bvs)(?<!\bmrs)(?<!\betc)(?<!\binc)(?<!\bltd)(?<!\bco)(?<!\bprof)\.(?=\s|$)",
    re.IGNORECASE,
)

_NEG_ZH = r"不再|已经不|再也不|从不|从来不|并不|不|没有|没|别"
_NEG_EN = r"\b(?:no longer|not|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|haven't|hasn't)\b|n't\b"
#: "不" that negates nothing ("不错", "不仅…还…")
_NOT_NEGATION = re.compile(r"不(?:错|少|同|久|过|断|仅|但|管|论|然|光|只|止|得不|停|是吗|用谢)")
_NEGATION = re.compile(rf"{_NEG_ZH}|{_NEG_EN}", re.IGNORECASE)
#: a negation that ends a state (cessation), and verbs that end what follows them
_CESSATION = re.compile(
    r"不再|已经不|再也不|戒掉|戒了|辞掉|辞去|辞了|离开|退出|放弃|停掉|停了|卸载|退掉|不干了|不做了"
    r"|\b(?:no longer|any ?more|quit|quitted|left|stopped|gave up|give up|dropped|cancel(?:l)?ed|sold|resigned|handed (?:in )?(?:my |her |his )?notice(?: in)?)\b",
    re.IGNORECASE,
)
#: what says the clause is a supposition, not a fact
_HYPOTHETICAL = re.compile(r"如果|要是|假如|假设|万一|若是|\b(?:if|suppose|supposing|whether|unless)\b", re.IGNORECASE)
#: what says the clause is a plan or a wish: kept, as a plan
_PLAN = re.compile(
    r"打算|计划|准备|考虑|想要|想|希望|可能|也许|或许|将要|\b(?:plan(?:s|ning)? to|thinking (?:about|of)|considering|might|maybe|going to|gonna|hope to|want to|would like to|intend to)\b",
    re.IGNORECASE,
)
_PLAN_IN_PREDICATE = re.compile(
    r"打算|计划|准备|考虑|想|希望|可能|也许|或许|将要|将|要|plan|consider|might|maybe|going to|gonna|hope|want|would like|intend",
    re.IGNORECASE,
)
#: predicate words of liking or disliking that the sentence must say itself
_SENTIMENT = re.compile(
    r"不喜欢|喜欢|讨厌|厌恶|热爱|爱|恨|偏爱|偏好|\b(?:likes?|loves?|hates?|dislikes?|enjoys?|prefers?)\b", re.IGNORECASE
)
#: time words that qualify a predicate ("以前住", "上个月搬到", "now lives in"): not part of it
#: the Chinese words that put a value before now, also said before its verb or after its object
_BEFORE_ZH = "以前|之前|原来|原先|曾经|过去|从前|早先"
_PAST_WORDS = re.compile(rf"^(?:{_BEFORE_ZH})|^(?:used to|previously|formerly|once)\s+", re.IGNORECASE)
_TIME_WORDS = re.compile(
    r"^(?:上个?月|下个?月|这个?月|本月|去年|今年|明年|前年|上周|下周|这周|本周|昨天|今天|明天|前天|后天|"
    r"\d{1,4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月(?:\d{1,2}[日号])?)|"
    r"^(?:last (?:month|week|year)|this (?:month|week|year)|next (?:month|week|year)|yesterday|today|tomorrow)\s+",
    re.IGNORECASE,
)
_DATE_NOTE = re.compile(r"（\d{4}[^（）]{0,16}）|\(\d{4}[^()]{0,16}\)")
#: canonical predicate spellings that take a place or thing right after them ("住在上海")
_HEADS = sorted((k for k in SYNONYMS if not k.isascii() and len(k) >= 2), key=len, reverse=True)
#: of the object's words (Chinese: characters), the share a clause must say
OBJECT_OVERLAP = 0.8


@dataclass(frozen=True, slots=True)
class Rejected:
    """A statement not stored, and why (shown in the audit trail)."""

    statement: Statement
    reason: str
    quote: str = ""


@dataclass(frozen=True, slots=True)
class Verified:
    kept: list[Statement]
    rejected: list[Rejected]


def verify(
    statements: Sequence[Statement],
    messages: Sequence[Message],
    *,
    self_names: Sequence[str] = (),
    context: Sequence[Message] = (),
    people: Sequence[str] = (),
    kin: Sequence[tuple[str, str]] = (),
) -> Verified:
    """The statements the user's words support (tidied, ``past`` set where the words end them),
    and those they do not, each with its reason. ``self_names``: the user's own names ("王磊");
    ``people``: the names of the people the user spoke of before (stored entities: "豆豆"), who may
    be the subject of a sentence that says the object;
    ``context``: the thread's turns just before these, whose topic a sentence that names no one
    goes on with ("我正在开发知识中台。" … a batch later "缓存改用Memcached了。"); ``kin``: the
    user's people by the kin word they named them with before (("老公", "林涛")): what the words
    say of "my husband" is 林涛's."""
    # what may be the subject of a sentence: the batch's subjects (an object only is a place, a
    # thing, a value: "从上海搬到深圳" says nothing of 上海)
    names = {normalize(s.subject) for s in statements if len(normalize(s.subject)) >= 2}
    names |= {normalize(p) for p in people if len(normalize(p)) >= 2 and normalize(p) not in {normalize(n) for n in self_names}}
    kin = [*kin, *((kin_word(s.predicate), s.object) for s in statements if _is_self(s.subject, self_names) and _names_kin(s, messages))]
    kept: list[Statement] = []
    rejected: list[Rejected] = []
    for s in statements:
        shaped = shape(s, messages)
        if isinstance(shaped, Rejected):
            rejected.append(shaped)
            continue
        for part in shaped:
            result = check(part, messages, names=names, self_names=self_names, context=context)
            owner = _said_of(result.reason) if isinstance(result, Rejected) else None
            if owner and normalize(owner) != normalize(part.subject) and _subject_of_clause(owner, part.object, messages):
                # "星图项目使用Kafka" given to the user: the statement goes to the project the words
                # say it of, when the words support it of that project, or nowhere
                moved = check(part.model_copy(update={"subject": owner}), messages, names=names | {normalize(owner)}, context=context)
                result = moved if not isinstance(moved, Rejected) else result
            elif isinstance(result, Rejected) and _is_self(part.subject, self_names) and _names_kin(part, messages):
                result = part  # "my wife Emma": the user's own relation, though the words go on of the wife
            elif (
                isinstance(result, Rejected)
                and result.reason.startswith(_SAID_OF)
                and _HE_SHE.fullmatch(result.reason[len(_SAID_OF) :].strip())
            ):
                # "My wife Chen Yu joined me; she teaches piano" given to the user: the statement goes
                # to the one person the turn names before the pronoun, when the words support it of them
                who = _referent(part.object, messages, self_names)
                if who and normalize(who) != normalize(part.subject):
                    moved = check(part.model_copy(update={"subject": who}), messages, names=names | {normalize(who)}, context=context)
                    result = moved if not isinstance(moved, Rejected) else result
            if isinstance(result, Rejected) and not _is_self(part.subject, self_names):
                # "我老公叫林涛" … "My husband is learning Japanese" given to 林涛: the words say it of
                # the husband, who is 林涛 (kept under the word the words say: its evidence names it)
                for word in _kin_subjects(part.subject, kin):
                    moved = check(part.model_copy(update={"subject": word}), messages, names=names, context=context)
                    if not isinstance(moved, Rejected) and not _user_after(word, part.object, messages):
                        result = moved
                        break
            if isinstance(result, Rejected):
                rejected.append(result)
            else:
                kept.append(result)
    return Verified(kept, rejected)


def _kin_subjects(subject: str, kin: Sequence[tuple[str, str]]) -> list[str]:
    """The kin words a person the user named by one before (("老公", "林涛") for 林涛) may be
    spoken of by, in either language (老公, husband, 丈夫), where no other person was named by
    them. (What the words say of "my husband" is not moved from the user to the husband: "我妈做
    的红烧肉我最爱吃", "我爸让我考公务员" are the user's, or nobody's.)"""
    out: list[str] = []
    for word in sorted({k.lower() for k, n in kin if normalize(n) == normalize(subject)}):
        same = {word} | translations({word})
        same |= translations(same)  # 老公 -> husband -> 丈夫
        if len({normalize(n) for k, n in kin if k.lower() in same and _a_name(n)}) == 1:
            out += sorted(same - set(out))
    return out


def _user_after(word: str, obj: str, messages: Sequence[Message]) -> bool:
    """Whether the user speaks of themself between ``word`` and ``obj`` in the sentence that says
    them ("我爸让我考公务员", "my husband bought me a bike"): the user does it, or is given it."""
    w, o = normalize(word), normalize(obj)
    for m in messages:
        if m.role != "user":
            continue
        for sentence in split_text(normalize(m.text)):
            at, end = sentence.rfind(w, 0, max(sentence.find(o), 0)), sentence.find(o)
            if at >= 0 and end > at and _SELF.search(sentence[at + len(w) : end]):
                return True
    return False


#: the reason ``_about_subject`` gives when the words speak of something else; ``_said_of`` reads it back
_SAID_OF = "the words say it of "


def _subject_of_clause(name: str, obj: str, messages: Sequence[Message]) -> bool:
    """Whether ``name`` is what the object's clause speaks of: named before the object in that
    clause ("…，星图项目使用Kafka"), or the clause goes on from one that opens with it ("我们组的支付服务用Go
    写的，缓存是Redis") or ends with it ("正在开发星图项目，后端使用SpringBoot"). Not a place the user
    is at ("我在腾讯集团工作，喜欢Python": the user likes Python)."""
    n, o = normalize(name), normalize(obj)
    for m in messages:
        if m.role != "user":
            continue
        clauses = [c.strip() for c in _CLAUSE.split(normalize(m.text)) if c.strip()]
        for i, clause in enumerate(clauses):
            at = clause.find(o)
            if at < 0:
                continue
            if n in clause[:at]:
                return True
            prev = clauses[i - 1] if i else ""
            at = prev.find(n)
            return at >= 0 and (prev.endswith(n) or at == 0 or prev[:at].endswith("的"))
    return False


def _said_of(reason: str) -> str | None:
    """The project, system or company a rejection says the words speak of ("正在开发星图项目" ->
    星图项目, "我们组的支付服务" -> 支付服务), or None (a person, a pronoun, nothing named)."""
    if not reason.startswith(_SAID_OF):
        return None
    text = reason[len(_SAID_OF) :].strip()
    if not _NAMED.fullmatch(text):
        return None
    if text.isascii():
        return text
    name = re.split(r"[的们]", text)[-1]
    for _ in range(3):  # "正在开发星图项目": adverbs and a verb before the name are not the name
        name = re.sub(r"^[在我他她它]+", "", _ADVERBS.sub("", name))
        verb = next((v for v in _ZH_VERBS if name.startswith(v) and _NAMED.fullmatch(name[len(v) :])), None)
        if verb is None:
            break
        name = name[len(verb) :]
    return name if _NAMED.fullmatch(name) else None


#: the person a she/he/她/他 of the user's words may stand for: a name (not after a preposition:
#: "moved to Richmond"), or one of the user's people ("my wife", "我老婆"), a name right after it
#: being that same person ("my wife Chen Yu", "我妹妹小雨")
_TITLES = frozenset({"Mr", "Mrs", "Ms", "Dr"})
_EN_NAME = re.compile(r"(?<![\w.])(?:(?:Mr|Mrs|Ms|Dr)\.?\s+)?[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?\b")
_EN_PLACE_BEFORE = re.compile(r"\b(?:in|to|at|from|of|for|near|into|on)\s+$", re.IGNORECASE)
_MY_KIN = re.compile(rf"(?:我的?|俺的?|咱的?|阿拉|\bmy\s+|\bour\s+)({_KIN})", re.IGNORECASE)
_HE_SHE = re.compile(r"他|她|佢|\b(?:he|she)\b", re.IGNORECASE)
#: a 小/老/阿 name after "和", "跟", a comma (jieba misses some: "我跟老王和小李"); one more person
#: can only keep a pronoun from being given to someone
_ZH_NICKNAME = re.compile(r"(?:^|(?<=[和跟与同、，,\s]))(?:小|老|阿)[\u4e00-\u9fff]")


#: 老, 小 or 阿 and a common surname: how a friend or a spouse is called ("老周非要买个电动三轮"),
#: which jieba often does not tag as a name
_SURNAME_NICK = re.compile(
    r"[老小阿][王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金廖贾夏韦方白邹孟熊秦邱江尹薛段雷侯史陶黎贺顾郝龚邵万严武戴孔汤]"
)


def _nicknames(text: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each 老周, 小李 in ``text`` that is a word of its own there (not the
    小毛 of "小毛病")."""
    if not _SURNAME_NICK.search(text):
        return []
    bounds, at = {0}, 0
    for word, _flag in chinese_word_classes(text):
        at += len(word)
        bounds.add(at)
    return [(m.start(), m.end(), m.group(0)) for m in _SURNAME_NICK.finditer(text) if m.start() in bounds and m.end() in bounds]


def _people_before(text: str, self_names: Sequence[str]) -> list[str]:
    """The people ``text`` names, in order, one entry per person: a kin word with the name that
    follows it is one ("my wife Chen Yu" -> Chen Yu)."""
    found: list[tuple[int, int, str]] = [(m.start(), m.end(), m.group(1).lower()) for m in _MY_KIN.finditer(text)]
    own = {normalize(n) for n in self_names}
    names = [(a, b, n) for a, b, n in person_names(text)]
    for a, b, name in [(m.start(), m.end(), m.group(0)) for m in _ZH_NICKNAME.finditer(text)] + _nicknames(text):
        if not any(x <= a < y for x, y, _n in names):
            names.append((a, b, name))
    names += [
        (m.start(), m.end(), m.group(0))
        for m in _EN_NAME.finditer(text)
        if not _EN_PLACE_BEFORE.search(text[: m.start()]) and _a_name(m.group(0))
    ]
    for a, b, name in names:
        if normalize(name) in own:
            continue
        kin = next((i for i, (_s, e, _k) in enumerate(found) if text[e:a].strip(" ,，") in {"", "叫", "named", "called"}), None)
        if kin is not None:
            found[kin] = (found[kin][0], b, name)  # the kin word and its name: one person, by name
        elif not any(s <= a < e for s, e, _n in found):
            found.append((a, b, name))
    return [name for _s, _e, name in sorted(found)]


def _named_before(text: str, names: set[str], self_names: Sequence[str]) -> set[str]:
    """The people ``text`` names: as ``_people_before`` reads them, and the known ``names`` in it
    (``text`` may be lower-cased, where an English name shows only as a known one)."""
    found = {normalize(p) for p in _people_before(text, self_names)}
    known = {n for n in names if n and n in text and n not in {normalize(x) for x in self_names}}
    for m in _MY_KIN.finditer(text):  # "my husband tomasz": the kin word and the known name, one person
        if any(text[m.end() :].lstrip(" ,，").startswith(n) for n in known):
            found.discard(normalize(m.group(1)))
    found |= known
    return {f for f in found if not any(f != g and f in g for g in found)}  # "小雨" in "林小雨": one


def _referent(obj: str, messages: Sequence[Message], self_names: Sequence[str]) -> str | None:
    """Who the she/he (她/他) right before ``obj`` in the user's words stands for, when the turn
    names exactly one person before it ("My wife Chen Yu joined me; she teaches piano" -> Chen
    Yu); None when it names none or several (no guess between two)."""
    o = normalize(obj)
    for m in messages:
        if m.role != "user":
            continue
        text = m.text
        at = normalize(text).find(o)
        if at < 0:
            continue
        pronouns = list(_HE_SHE.finditer(text[:at]))
        if not pronouns:
            continue
        people = {normalize(p): p for p in _people_before(text[: pronouns[-1].start()], self_names)}
        return next(iter(people.values())) if len(people) == 1 else None
    return None


def _a_name(text: str) -> bool:
    """Whether ``text`` can be a person's name: a Chinese name (jieba's, or 小/老/阿 and a
    character), or capitalised English words no dictionary knows ("Chen Yu", "Mr. Patel")."""
    if text.isascii():
        words = text.replace(".", " ").split()
        return bool(words) and all(w[0].isupper() and (w in _TITLES or not english_word_classes(w)) for w in words)
    if person_names(text) or _ZH_NICKNAME.fullmatch(text):
        return True
    # a name jieba does not tag alone ("周建国" reads as 周 and 建国): a surname that is a word of
    # its own and one or two characters (not "周末", "高兴", "游泳时间")
    classes = chinese_word_classes(text)
    surname_alone = len(classes) >= 2 and classes[0][0] == text[:1]  # "周/建国", not "游泳/时间"
    return 2 <= len(text) <= 3 and text[0] in SURNAMES and bool(re.fullmatch(r"[\u4e00-\u9fff]+", text)) and surname_alone


def kin_word(predicate: str) -> str:
    """The kin word a predicate is ("妹妹", "has sister" -> sister, "我的老婆"), or "": an
    attribute of the user's so named holds the names of the user's people."""
    pred = re.sub(r"^(?:has\s+|have\s+|my\s+|有|我的?|俺的?)", "", normalize(predicate))
    return pred if re.fullmatch(rf"(?:{_KIN})", pred) else ""


def _names_kin(s: Statement, messages: Sequence[Message]) -> bool:
    """Whether the user names one of their people as the statement says: user|妹妹|林小雨 of
    "我妹妹林小雨…" or "林小雨是我妹妹", user|wife|Emma of "my wife Emma" or "Emma is my wife". The
    object is a name (a Chinese person's name, or capitalised English words no dictionary knows),
    never a value of the kin word's clause ("我妹妹大三")."""
    pred = kin_word(s.predicate)
    if not pred:
        return False
    raw = s.object.strip()
    if not _a_name(raw):
        return False
    p, o = re.escape(pred), re.escape(normalize(raw))
    said = re.compile(rf"(?:\bmy\s+|我的?|俺的?){p}\s*[,，]?\s*(?:叫|名叫|named|called)?\s*{o}|{o}\s*(?:is|是)\s*(?:my\s+|我的?){p}")
    return any(m.role == "user" and said.search(normalize(m.text)) for m in messages)


#: a kin word of the user's that may be a Chinese object ("我女儿", "女儿", "俺闺女")
_KIN_OBJECT = re.compile(rf"(?:我的?|俺的?|咱的?)?(?:{_KIN})")


def _object_does_it(s: Statement, messages: Sequence[Message]) -> bool:
    """Whether a Chinese object that is a person (a kin word, a name) is said right before the
    predicate's verb, as its subject: "女儿毕业了" is 女儿's graduation, not the user's of 女儿;
    "陈昊上个月跟我求婚了" is 陈昊's proposal to the user, not the user's to 陈昊."""
    obj, verb = normalize(s.object), (normalize(s.predicate).rstrip("了过着") or normalize(s.predicate))
    if not obj or not verb or obj.isascii() or verb.isascii():
        return False
    person = _KIN_OBJECT.fullmatch(obj) or any(name == obj for _start, _end, name in person_names(obj))
    if not person:
        return False
    # a time word and "to me" may come between ("陈昊上个月跟我求婚了": 陈昊 proposed, to the user)
    pattern = re.compile(
        r"(?<![跟和与向对给同找陪帮])"  # "跟刘洋求婚": 刘洋 is whom, the user does it
        + re.escape(obj)
        + r"(?:也|都|已经|刚|才|终于|今年|去年|早就|就|上个?月|上周|昨天|前天|今天|刚刚|前几天|那天)*"
        + r"(?:跟我|和我|对我|向我|给我|找我|帮我|陪我|同我)?(?:也|都|已经|刚|才|终于|就)?"
        + re.escape(verb)
    )
    return any(m.role == "user" and pattern.search(normalize(m.text)) for m in messages)


_ZH_PERSONAL = frozenset({"我", "你", "他", "她", "俺", "咱", "我们", "你们", "他们", "她们", "咱们", "佢", "侬", "阿拉"})


def _pronoun_and_verb(obj: str) -> bool:
    """Whether a Chinese object holds a personal pronoun and a verb: a clause ("我这边来住", "帮我
    带孩子"), not a value ("我家" has no verb)."""
    if not any(p in obj for p in _ZH_PERSONAL):
        return False
    words = chinese_word_classes(obj)
    return any(w in _ZH_PERSONAL for w, _f in words) and any(f.startswith("v") for _w, f in words)


def clause_for_name(subject: str) -> bool:
    """Whether a statement's subject is a clause, not a name ("好，我挺喜欢的", "I have no spine")."""
    return bool(re.search(r"[，,。；;！!？?]", subject.strip()) or _EN_CLAUSE_SUBJECT.match(subject.strip()))


def shape(s: Statement, messages: Sequence[Message]) -> list[Statement] | Rejected:
    """A statement in the shape of a relation, before its words are checked: a predicate that is a
    clause of the user's words is split back into its verb and value or dropped, and an object
    that lists several values ("Spark、Airflow和Hive") is one statement per value; an object that
    is a clause ("日常用Spark") or a bare verb ("looking for") is dropped, as is a statement whose
    subject is its object or whose predicate is only a time word ("next|Tuesday")."""
    s, _ = _tidy(s)
    s = _split_swallowed(s, messages)
    if normalize(s.subject) == normalize(s.object):
        return Rejected(s, "the subject is its own object")
    if clause_for_name(s.subject):
        return Rejected(s, "the subject is a clause, not a name")  # "好，我挺喜欢的", "I have no spine"
    named = _KIN_AND_NAME.fullmatch(s.predicate.strip())
    if named and _a_name(named.group(2)) and named.group(2) not in normalize(s.object):
        # "陈静|妹妹陈晨|上海" of "我妹妹陈晨在上海读研": the relation said is 妹妹 陈晨; the value is
        # the sister's, under no predicate of hers, and goes
        return [s.model_copy(update={"predicate": named.group(1).strip(), "object": named.group(2)})]
    if _a_name(s.predicate.strip()) and not kin_word(s.predicate) and not is_alias(s.predicate):
        return Rejected(s, "the predicate is a name, not a relation")  # "User|Aditya|5th std"
    if _PRONOUN_ONLY.fullmatch(normalize(s.object)) and s.object.strip() != "IT":  # "IT": a department
        return Rejected(s, "the object is a pronoun, not a value")  # "…|是|我"
    if not s.subject.isascii() and _TIME_WORDS.match(normalize(s.subject)) and len(normalize(s.subject)) > 4:
        return Rejected(s, "the subject is a clause, not a name")  # "下周找个大课间拍"
    if _TIME_SUBJECT.fullmatch(normalize(s.subject)):
        return Rejected(s, "the subject is a time, not a name")  # "下周六|参加|复试"
    if normalize(s.predicate) == normalize(s.object):
        return Rejected(s, "the predicate is its own object")  # "俺这个月|工资少了一千|工资少了一千"
    if not s.object.isascii() and re.search(r"[\u3400-\u9fff]了$", normalize(_DATE_NOTE.sub("", s.object))):
        return Rejected(s, "the object is a clause, not a value")  # "天天往纸箱里钻了", "涨两回了", "婚期|改了"
    if not s.object.isascii() and _pronoun_and_verb(normalize(s.object)):
        return Rejected(s, "the object is a clause, not a value")  # "唐甜|搬到|我这边来住"
    if kin_word(s.predicate) and not _a_name(s.object.strip()):
        return Rejected(s, "a kin word relates to a person, not a value")  # "我|娘|港" of "我娘天天港我…"
    if s.object.isascii() and _EN_CLAUSE.search(s.object):
        return Rejected(s, "the object is a clause, not a value")  # "…|been doing it since college"
    if not s.object.isascii() and _HYPOTHETICAL.search(normalize(s.object)):
        return Rejected(s, "the object is a clause, not a value")  # "用户|是|额想着要是生意一直好"
    if _object_does_it(s, messages):
        return Rejected(s, "the object is the one who does it, not a value")  # "用户|毕业|女儿" of "女儿毕业了"
    p = normalize(s.predicate)
    if _REPORTED.search(p):
        return Rejected(s, "the predicate reports words, not a fact")  # "医生|说|三个月不能跑", "听说"
    if _TIME_ONLY.fullmatch(p):
        return Rejected(s, "the predicate is a time word, not a relation")
    if _NEGATION_ONLY.fullmatch(p):
        return Rejected(s, "the predicate is only a negation, not a relation")  # "User|no longer|drive"
    if _UNDECIDED.search(p) or _UNDECIDED.search(normalize(s.object)):
        return Rejected(s, "the words say it is undecided, not a fact or a plan")  # "用户|纠结|秦L和Model 3"
    if _NO_RELATION.fullmatch(p) or _no_verb_zh(p):
        return Rejected(s, "the predicate is no verb or relation")  # "User|near|university", "User|nothing|decided"
    if _QUANTITY.fullmatch(normalize(s.object)) and not _TIMELY.search(p):
        return Rejected(s, "the object is a time or a frequency, not a value")  # "User|work|every day"
    if p in _EN_COPULAS and s.object.isascii():
        unsaid = _copula_says(s.object, messages)
        if unsaid is not None:
            return Rejected(s, unsaid)  # "User|is|vancouver" of "I moved to Vancouver", "User|is|working"
    if _en_topic(s, messages):
        return Rejected(s, "the predicate is the topic of a clause, not a relation")  # "User|new organiser|plays"
    if _thing_of_someone(p, messages):
        return Rejected(s, "the predicate is a thing of someone's, not a relation")  # "徐涛|政治课|有用" of "徐涛的政治课真的有用"
    if _topic_of_a_clause(s, messages):
        return Rejected(s, "the predicate is the topic of a clause, not a relation")  # "用户|嗓子|冒烟" of "嗓子都快冒烟咧"
    if _CLOCK.fullmatch(normalize(s.object)) and not _TIMELY.search(p) and not _AT_TIME.search(p):
        return Rejected(s, "the object is a time of day, not a value")  # "用户|加班|十点" of "加班到十点"
    if not p.isascii() and p.endswith("得") and not p.endswith(_DE_WORDS):
        return Rejected(s, "the predicate is a verb and how it went (得), not a relation")  # "用户|睡得|确实好点"
    said = _said_predicate(s, messages)
    if isinstance(said, Rejected):
        return said
    s = said
    p = normalize(s.predicate)
    if not p.isascii() and place_names(p) and not any(p.startswith(h) for h in _HEADS):  # split back, it still holds one
        return Rejected(s, "the predicate holds a place, not a relation")  # "用户|去了长沙|智能家居"
    parts = _list_parts(s.object)
    if len(parts) > 1 or normalize(parts[0]) != normalize(s.object):
        cleaned = [_clean_part(x, s.predicate) for x in parts]
        if any(x is None for x in cleaned):
            return Rejected(s, "the object is a clause, not a value")
        return [s.model_copy(update={"object": x}) for x in cleaned if x]
    if _clean_part(s.object, s.predicate, whole=True) is None or _INNER_VERB.search(normalize(s.object)):
        return Rejected(s, "the object is a clause, not a value")
    if _ADVERB_OBJECT.fullmatch(normalize(s.object)):
        return Rejected(s, "the object is a time word, not a value")
    when = _EN_WHEN_OBJECT.fullmatch(normalize(s.object))
    if when and not _TIMELY.search(p) and (when.group("unit") or _PLAN_IN_PREDICATE.search(p) or _PLAN.search(p)):
        # how long ("User|is vegetarian|for about six years"), or when a plan is ("thinking about
        # marathon|October"); when a thing was done stays ("User|quit smoking|February")
        return Rejected(s, "the object is a time, not a value")
    if _inside_a_word(s.object, s.predicate, messages):
        return Rejected(s, "the object is part of a longer word")  # "用户|计划|寿面" of "长寿面肯定要有"
    if _INTERJECTION.fullmatch(normalize(s.object)):
        return Rejected(s, "the object is an interjection, not a value")
    if s.object.isascii() and (
        re.search(r"\b(?:for|to|at|in|on|of|with|from|about|by)$", normalize(s.object))
        or re.search(r"\b(?:in|out|up|off|down|back|away) (?:at|to|for|with|from|on|of)\b", s.object)  # not "Back to Basics"
    ):
        return Rejected(s, "the object is a verb phrase, not a value")  # "User|handed|notice in at call centre"
    return [s]


#: a subject that is only a time ("下周六", "明天上午", "next Friday")
_TIME_SUBJECT = re.compile(
    r"(?:上|下|这|本)?(?:个)?(?:周|星期|礼拜)[一二三四五六日天末]?|(?:上|下|这|本)个?月(?:初|底|中)?|(?:今|明|后|昨|前)天(?:上午|下午|晚上|早上)?|"
    r"(?:去|今|明|前)年(?:底|初)?|(?:next|last|this|coming) (?:week|month|year|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"today|tomorrow|yesterday|tonight",
    re.IGNORECASE,
)
#: an English object that only says when or how long ("for about six years", "October", "next Friday";
#: group "unit": how long)
_EN_WHEN_OBJECT = re.compile(
    r"(?:(?:for|since|in|on|by|until|from|over|about|around|almost|nearly|roughly|the|past|last|next|this|coming|early|late|mid|a few|several|"
    r"a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+)[\s-]+)*"
    r"(?:(?P<unit>years?|months?|weeks?|days?|hours?|decades?)|january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekends?|spring|summer|autumn|fall|winter)"
    r"(?:\s+(?:ago|now|or so|\d{1,2}(?:st|nd|rd|th)?|\d{4}))*",
    re.IGNORECASE,
)


def _modifier_in(sentence: str, obj: str) -> bool:
    """Whether an English name as the object comes, where this sentence says it, between an
    article and a noun ("the Denver marathon", "a Python job"): it says what kind the noun is,
    and the value is the noun phrase, not it ("downtown Denver now" says it as a value)."""
    words = obj.split()
    if not obj.isascii() or not words:
        return False
    tokens = _EN_TOKEN.findall(sentence)
    lowered = [t.lower() for t in tokens]
    n = len(words)
    for i in range(len(tokens) - n + 1):
        if lowered[i : i + n] == [w.lower() for w in words]:
            before = lowered[i - 1] if i else ""
            after = lowered[i + n] if i + n < len(tokens) else ""
            name = all(t[:1].isupper() for t in tokens[i : i + n])
            return name and before in {"the", "a", "an", "this", "that"} and after.isalpha() and "NOUN" in english_word_classes(after)
    return False


def _thing_of_someone(predicate: str, messages: Sequence[Message]) -> bool:
    """Whether a Chinese predicate is a noun (jieba's classes: nouns only) that the user says
    only after 的, as a thing someone has ("徐涛的政治课真的有用"): no relation. A label of the
    profile (职业, 老婆) or a kin word is a relation as the user names it."""
    if predicate.isascii() or len(predicate) < 2 or predicate in SYNONYMS or canonical(predicate) != predicate or kin_word(predicate):
        return False
    classes = chinese_word_classes(predicate)
    if not classes or not all(flag.startswith("n") and flag not in ("nr", "ns") for _, flag in classes):
        return False
    said = [normalize(m.text) for m in messages if m.role == "user" and predicate in normalize(m.text)]
    not_after_de = re.compile(rf"(?<!的){re.escape(predicate)}")
    return bool(said) and not any(not_after_de.search(t) for t in said)


def _inside_a_word(obj: str, predicate: str, messages: Sequence[Message]) -> bool:
    """Whether a Chinese object, wherever the user says it, starts or ends inside a word of theirs
    (jieba's dictionary words): a piece of another word, not a value ("寿面" of "长寿面"). A word
    that is a verb and its object ("吃火锅") starts with the predicate's verb: the object is whole."""
    obj, p = obj.strip(), normalize(predicate)
    if obj.isascii() or len(obj) < 2:
        return False
    seen = False
    for m in messages:
        if m.role != "user" or obj not in m.text:
            continue
        spans = word_spans(m.text)
        for hit in re.finditer(re.escape(obj), m.text):
            seen = True
            a, b = hit.start(), hit.end()
            verb_before = [m.text[start:a] for start, end in spans if start < a < end]
            if all(v in _OWN_VERBS or p.endswith(v) for v in verb_before) and not any(start < b < end for start, end in spans):
                return False
    return seen


#: a kin word and the person's name written as a predicate ("妹妹陈晨", "sister Anna")
_ZH_KIN = sorted((k for k in _KIN.split("|") if k and not k.isascii()), key=len, reverse=True)
_KIN_AND_NAME = re.compile(
    rf"((?:{'|'.join(_ZH_KIN)})|(?:wife|husband|sister|brother|son|daughter|mom|dad|boss|friend|partner)\s)\s*(\S.*)", re.IGNORECASE
)

#: an object that only points at someone: no value
_PRONOUN_ONLY = re.compile(
    r"(?:我|你|您|他|她|它|我们|你们|他们|她们|咱们|自己)的?|me|you|him|her|it|us|them|myself|yours|mine|his|hers", re.IGNORECASE
)  # "咖啡我听你的": 你的 is no value
#: a clause copied as an object: a light verb between two stretches of words ("南京一家设计公司做UI设计师")
_INNER_VERB = re.compile(r"[\u3400-\u9fffA-Za-z0-9]{2}(?:做|在|是|住|用)(?!法|事|客|人|户|品|意|具|途|处)[\u3400-\u9fffA-Za-z0-9]{2}")
#: objects that are only an adverb of time or aspect ("User|drink water|now")
_ADVERB_OBJECT = re.compile(
    r"now|currently|then|still|already|though|anymore|any more|again|too|also|either|as well|现在|目前|如今|已经|还|也|又|仍然|依然|了"
)
#: objects that are laughter or a filler ("爬不动了哈哈" gave "用户|爬不动了|哈哈")
_INTERJECTION = re.compile(r"(?:哈|呵|嘿|嘻|嗯|啊|哦|噢|呀|唉|哎|嗨|哇|lol|haha|hehe|lmao|ha|hah|um|uh|oh|wow|\W)+", re.IGNORECASE)
#: predicates that are only a negation: the verb they negate is missing
_NEGATION_ONLY = re.compile(r"no longer|not|never|don't|doesn't|didn't|no|不再|已经不|再也不|不|没有|没|别", re.IGNORECASE)
#: predicates that name no relation: a preposition or a pronoun alone ("a coffee shop near the
#: university" gave "User|near|university"; "nothing is decided" gave "User|nothing|decided")
_NO_RELATION = re.compile(
    r"near|at|in|on|to|with|for|from|by|of|about|into|under|over|around|between|after|before|than|during|within|without|through|"
    r"across|behind|above|below|via|per|as|nothing|something|anything|everything|it|this|that|there|here",
    re.IGNORECASE,
)
#: words that say the user has not decided: no fact and no plan ("在秦L和Model 3之间纠结",
#: "东京还没想好要不要加", "torn between the two")
_UNDECIDED = re.compile(
    r"纠结|犹豫|还没想好|没想好|想不好|要不要|该不该|拿不定|不确定|\b(?:torn between|can't decide|cannot decide|undecided|not sure|unsure|on the fence)\b",
    re.IGNORECASE,
)
#: a next clause that says the plan before it is undecided, its object left out ("我打算换辆电车，
#: 不过还没想好要不要换", "…, but I'm not sure yet")
_UNDECIDED_NEXT = re.compile(
    r"^\W*(?:不过|但是?|可是|只是|就是)?(?:我|俺|咱)?们?(?:现在|目前)?(?:还|也|都)?(?:在|是)?(?:考虑|犹豫|纠结|没想好|想不好|拿不定主意|不确定|没决定)?"
    r"(?:要不要|该不该|[\u4e00-\u9fff]不[\u4e00-\u9fff])[\u4e00-\u9fff]{0,2}(?:呢|啊|哈)?\W*$"
    r"|^\W*(?:but|though|although)?\s*(?:i'm|i am|we're|we are|i|we)?\s*(?:still\s+)?(?:not sure|unsure|undecided|deciding|on the fence|haven't decided|can't decide)"
    r"(?:\s+(?:yet|about it|about that|though))*\W*$",
    re.IGNORECASE,
)


def _undecided_next(sentence: str, clause: str) -> bool:
    text = normalize(sentence)
    at = text.find(clause)
    if at < 0:
        return False
    rest = text[at + len(clause) :]
    following = _CLAUSE.split(rest, maxsplit=1)[0] if rest else ""
    return bool(following.strip()) and bool(_UNDECIDED_NEXT.match(following.strip()))


#: the words before a plan word that name its doer ("领导打算调我去…", "my company wants to move me")
_PLAN_WORD = re.compile(
    r"打算|计划|准备|想要|想让|想派|要派|要调|希望|\b(?:plans? to|planning to|wants? to|wanted to|intends? to|hopes? to|would like to|(?:is|are) going to)\b",
    re.IGNORECASE,
)
_ORG = r"公司|单位|学校|部门|团队|领导|老板|上面|厂里|家里|医院|银行|集团|总部|组里|院里|系里|\b(?:company|employer|firm|office|school|team|boss|manager|department|work)\b"
_MINE_BEFORE = re.compile(rf"(?:我们|我|咱们|咱|俺)的?(?=(?:{_KIN}|{_ORG}))|\b(?:my|our)\s+(?=\w)", re.IGNORECASE)
_SELF_DOER = re.compile(r"我|俺|咱|\b(?:i|i'm|i've|we|we're|we've)\b", re.IGNORECASE)
_OTHER_DOER = re.compile(rf"{_KIN}|{_ORG}|他|她|它|大家|别人|人家|\b(?:he|she|they|he's|she's|they're|it)\b", re.IGNORECASE)


def _plan_of_another(tail: str) -> bool:
    """Whether the first plan word of the object's clause is someone else's: the words before it
    name another person or an organisation and not the user as a doer ("公司打算明年派我去东京",
    "My company wants to move me to Boston"; not "我和老婆打算…", "明年我打算…")."""
    plan = _PLAN_WORD.search(tail)
    if not plan:
        return False
    doer = tail[: plan.start()]
    mine_gone = _MINE_BEFORE.sub(" ", doer)  # "我老公", "our boss": the other is the doer
    if _SELF_DOER.search(mine_gone):
        return False
    return bool(_OTHER_DOER.search(doer) or person_names(doer) or _nicknames(doer))


#: the user as the doer right after an object said as the topic ("蛋糕我打算自己烤")
_SELF_AFTER_TOPIC = re.compile(r"^(?:我|俺|咱)们?(?:也|还|都|就)?(?:打算|准备|计划|想|要|会|自己)")


#: what a one-character Chinese predicate is when it is no verb: a word of place or direction (底 of
#: "上个月底报到的" gave "用户|底|报到"), a measure word, a particle, a conjunction
_NO_VERB_FLAGS = frozenset({"f", "q", "uj", "ul", "uz", "ug", "uv", "ud", "c", "y", "e", "o"})


def _no_verb_zh(predicate: str) -> bool:
    """A predicate of one Chinese character that jieba reads as no verb (上 and 下 are verbs too:
    "上大学", "下围棋")."""
    if len(predicate) != 1 or predicate.isascii() or predicate in "上下家":  # "家|杭州": where home is
        return False
    return any(flag in _NO_VERB_FLAGS for _, flag in chinese_word_classes(predicate))


#: predicates whose value may be a time or a frequency ("健身频率=每周三次", "birthday")
_TIMELY = re.compile(r"时间|日期|频率|次数|多久|几点|生日|time|date|when|often|frequen|schedule|since|until|birthday|day", re.IGNORECASE)
#: predicates that are only a time word ("next" of "next Tuesday", "下" of "下周二")
_TIME_ONLY = re.compile(
    r"(?:next|last|this|coming|previous|on|at|下个?|上个?|这个?|本|每|天天|每天|每日|成天|整天|经常|平时|一直|总是|常常|老是)",
    re.IGNORECASE,
)
#: an English subject that is a sentence: a pronoun and more words, or words ending as a sentence does
#: ("I have no spine", "Gerard finished dory number three and sold it …")
_EN_CLAUSE_SUBJECT = re.compile(r"(?:(?:I|I'm|I've|we|he|she|they|you)\s+\S+\s+\S+.*|\S+\s+\S+\s+\S+.*[.!?])$", re.IGNORECASE)
#: what may stand between a topic and what is said of it ("嗓子都快冒烟", "作息倒是正常了")
_TOPIC_ADVERBS = "(?:都|也|就|快|倒是|还|又|真|太|特别|一直|总是|老是|简直|确实|可|挺|蛮|超|贼|忒|已经)*"


def _topic_of_a_clause(s: Statement, messages: Sequence[Message]) -> bool:
    """Whether a Chinese predicate is a noun the user's words say something of, with the object
    that something (a verb or an adjective said right after it): "嗓子都快冒烟咧" gave
    "用户|嗓子|冒烟", "被医生念到不行" "用户|医生|念到不行", "演唱会一场不落" "用户|演唱会|一场不落".
    A noun before a value is kept ("月薪两万"), and so are a known relation and a label (爱好, 职业)."""

    p, obj = normalize(s.predicate), normalize(_DATE_NOTE.sub("", s.object))
    if p.isascii() or p in SYNONYMS or canonical(p) != p or p in _LABELS or not obj or p in _OWN_VERBS or p in _ZH_VERBS:
        return False  # jieba tags a verb of one character a noun ("学游泳": 学 n)
    said = re.compile(re.escape(p) + _TOPIC_ADVERBS + re.escape(obj[:2]))
    for m in messages:
        found = said.search(normalize(m.text)) if m.role == "user" else None
        if not found:
            continue
        # the words' classes where the user says them ("学游泳": 学 a verb there, a noun alone)
        words, at, tagged = chinese_word_classes(normalize(m.text)), 0, []
        for word, flag in words:
            if found.start() <= at < found.start() + len(p):
                tagged.append(flag)
            at += len(word)
        noun = any(f.startswith("n") for f in tagged) and all(f.startswith("n") or f in ("m", "q", "r") for f in tagged)
        if noun and any(flag[:1] in ("v", "a") for _, flag in chinese_word_classes(obj)):
            return True
    return False


#: an object that is only a time of day ("十点", "7:30", "6 pm")
_CLOCK = re.compile(
    r"(?:[0-9一二两三四五六七八九十]+(?:点|點)(?:半|钟|多|左右)?|\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock)|\d{1,2}:\d{2})",
    re.IGNORECASE,
)
#: a predicate that takes a time of day ("avoids caffeine after|2 pm", "睡到|十点")
_AT_TIME = re.compile(r"(?:到|至|前|后|之前|以后|之后|以前|\b(?:at|after|before|until|till|by|from))$", re.IGNORECASE)
#: words that end in 得 and are verbs of their own (觉得, 记得), not a verb with its complement ("睡得")
_DE_WORDS = ("觉得", "记得", "获得", "取得", "懂得", "晓得", "舍得", "值得", "显得", "使得", "免得", "难得", "赢得", "认得", "博得", "习得")
#: a number, a count or a frequency in a predicate ("每周去三次", "goes three times a week"): not a relation's name
_QUANTITY = re.compile(
    r"[0-9０-９]|[一二两三四五六七八九十百千万几半]+\s*(?:次|杯|个|天|周|年|月|小时|公里|本|瓶|罐|根|支|包|遍|趟|回|口|斤|元|块|岁|顿|节|场|份|只|条|头|辆|套|台|部|张|件|位|名|家|门)|每(?:周|天|日|月|年|次|晚|早|星期)"
    r"|\b(?:once|twice|(?:one|two|three|four|five|six|seven|eight|nine|ten|\d+) (?:times?|days?|cups?|cans?|hours?|miles?|km|glasses|bottles|packs?))\b|\b(?:every|per|a) (?:day|week|month|year|morning|night)\b",
    re.IGNORECASE,
)
#: adverbs before a verb that are not part of a relation ("主要练力量", "日常用Spark")
_ADVERBS = re.compile(r"^(?:主要|平时|日常|经常|一般|通常|常常|总是|每天都|都|也|还|又|一直|正在|目前|现在|比较|特别|非常|很)+")
#: Chinese verbs that take a value right after them: "做前端开发" is 做 + 前端开发
_ZH_VERBS = sorted(
    {
        *(k for k in SYNONYMS if not k.isascii()),
        "做",
        "练",
        "学",
        "写",
        "用",
        "开",
        "养",
        "教",
        "带",
        "玩",
        "打",
        "弹",
        "吃",
        "喝",
        "读",
        "看",
        "去",
        "考",
        "管",
        "跑",
        "抽",
        "研究",
        "从事",
        "负责",
        "参加",
        "担任",
        "学习",
        "喜欢",
        "爱",
        "讨厌",
        "擅长",
        "开发",
        "主修",
        "攻读",
        "就读",
        "养了",
        "学了",
        "在做",
        "在学",
        "在用",
    },
    key=len,
    reverse=True,
)


#: verbs whose object a clause says ("…还是吃的", "也喝茶"): 是/有/在 are left out ("特别是游泳")
_OWN_VERBS = set("做练学写开养教带玩打弹吃喝读看去考管跑抽买卖骑")


#: a copula or a role verb with an indefinite "a" ("是一名", "当了一位", "成为一个"): the verb alone
_COPULA_ONE = re.compile(r"(是|当了?|做了?|成为了?|成了)一(?:名|个|位|家|只|种)")


def _said_predicate(s: Statement, messages: Sequence[Message]) -> Statement | Rejected:
    """A predicate that is a stretch of the user's words said apart from the object ("每周去三次"
    and "主要练力量" given 健身房, "做前端开发" given React of "…，主要写React"): the model put a verb
    and its own value in the predicate and gave it an object from another clause. Split back into
    the verb and that value ("做|前端开发", "练|力量"), the object it was given dropped; dropped
    whole when it holds a number or a frequency ("每周去三次") or no verb it can be split at. A
    time given as the object of a predicate said in another clause ("抽烟|每天早上" of "我每天早上都喝
    两杯咖啡，还抽烟") is dropped: the time is said of something else."""
    from .supersede import canonical

    p = normalize(s.predicate)
    core = _ADVERBS.sub("", p) or p
    if p.isascii():
        if _QUANTITY.search(p):
            return Rejected(s, "the predicate holds a number or frequency, not a relation")
        if _noun_of_the_words(s.predicate, messages):
            return Rejected(s, "the predicate is a noun of the user's words, not the subject's relation")
        return s
    if canonical(p) != s.predicate.strip() or len(core) < 2:
        return s
    copula = _COPULA_ONE.fullmatch(core)
    if copula:  # "是一名|程序员": an indefinite article, not a count ("I am a programmer")
        return s.model_copy(update={"predicate": copula.group(1).removesuffix("了")})
    counted = len(core) >= 3 and _QUANTITY.search(core) is not None
    if not counted:  # a count in a predicate makes it a clause wherever its object was said
        obj = normalize(_DATE_NOTE.sub("", s.object))
        clauses = [c for m in messages if m.role == "user" for c in _CLAUSE.split(normalize(m.text)) if c.strip()]
        with_p = [c for c in clauses if core in c]
        if not with_p or any(
            (obj in c and c.find(obj) >= c.find(core)) or (obj not in c and overlap(obj, c) >= OBJECT_OVERLAP) for c in with_p
        ):
            return s  # not said as such, or said with its object after it
        if _WHEN.match(obj) or re.match(r"^(?:每|早上|晚上|中午|下午|上午|周末|平时)", obj):
            return Rejected(s, "the time is said of something else")
        if len(core) < 3:
            # "吃素|鸡蛋和牛奶" of "我开始吃素了，不过鸡蛋和牛奶还是吃的": the object's own clause has
            # its own verb; it is that verb's object (the predicate's, when it is that verb)
            rest = [c.replace(obj, " ") for c in clauses if obj in c and core not in c]
            verbs = {v for c in rest for v in _OWN_VERBS if v in c}
            if rest and verbs:
                if core.rstrip("了掉") == "戒" and len(verbs) == 1 and _ended_in_one_message(obj, core, messages):
                    # "我以前每天喝两杯咖啡，上个月戒了" gave 戒了|咖啡: what ended is 喝|咖啡
                    return s.model_copy(update={"predicate": next(iter(verbs)), "past": True})
                return (
                    s.model_copy(update={"predicate": core[0]}) if core[0] in verbs else Rejected(s, "the object is said with another verb")
                )
            return s
    else:  # "开一辆白色的思域" is 开 + 白色的思域; "每周去三次" holds nothing but the count
        core = _QUANTITY.sub("", core)
    if counted and core.strip("了过着") in _ZH_VERBS:  # "每周去三次|健身房": the verb, of its object
        return s.model_copy(update={"predicate": core.strip("了过着")})
    verb = next((v for v in _ZH_VERBS if core.startswith(v) and len(core) - len(v) >= (1 if counted else 2)), None)
    if verb is None:
        return Rejected(
            s,
            "the predicate holds a number or frequency, not a relation"
            if counted
            else "the predicate is a clause of the user's words, not a relation",
        )
    value = re.sub(r"^[了过着]", "", core[len(verb) :]).strip()
    if not value or _QUANTITY.search(value) or _WHEN.match(value):
        return Rejected(s, "the predicate holds a number or frequency, not a relation")
    return s.model_copy(update={"predicate": verb.removesuffix("了"), "object": value})


#: a word before a noun that is not the user's: an article, a demonstrative, another's possessive
_DETERMINER = frozenset(
    {"the", "a", "an", "this", "that", "these", "those", "his", "her", "their", "its", "your", "some", "any", "every", "each"}
    | {"no", "another", "new", "old"}
)
#: the word classes of an English word that can only name a thing (or describe one)
_NOMINAL = frozenset({"NOUN", "PROPN", "ADJ", "NUM"})
_EN_PERSONAL = frozenset({"i", "we", "you", "he", "she", "they", "it", "me", "us", "him", "them"})
_COMPOUND_STOP = _EN_PERSONAL | _DETERMINER | {"my", "our"}
_EN_TOKEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|[^\sA-Za-z0-9]")


def _noun_of_the_words(predicate: str, messages: Sequence[Message]) -> bool:
    """Whether an English predicate that is no known relation is a noun phrase of the user's words
    rather than a verb of theirs: everywhere the user says it, it follows an article, a
    demonstrative or another's possessive, or a noun after one ("I quit the coffee shop" gave
    "User|shop|customer"; "I've given up the pub quiz on Thursdays" gave
    "User|pub quiz|Thursdays", "the new quizmaster asks …" gave "User|quizmaster|TikTok"), or it
    starts with a word that can never be a verb ("college three days a week" gave
    "User|college|three days a week"). Said after "my" or "our" it is a label of the user's own
    ("my hobby is knitting"), kept; so is a name (a capital: "a lurcher called Sailor") and a phrase
    the user never says as such (the other checks decide)."""

    p = normalize(predicate)
    words = [w for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", p) if not _LIGHT.fullmatch(w)]
    if not words or p in SYNONYMS or canonical(p) != p or is_alias(predicate):
        return False  # a known relation, or a noun said as changed ("I have a new coach now, Priya")
    classes = english_word_classes(words[0])
    verbal = not classes or not classes <= _NOMINAL  # a word the lexicon does not know may be one
    said = False
    for m in messages:
        if m.role != "user":
            continue
        tokens = _EN_TOKEN.findall(m.text)
        lowered = [t.lower() for t in tokens]
        for i in range(len(tokens)):
            if lowered[i : i + len(words)] != words and not (len(words) > 1 and lowered[i] == words[0]):
                continue
            if tokens[i][:1].isupper() and i and tokens[i - 1] not in ".!?":
                return False  # a name
            said = True
            j = i - 1  # a noun of a compound before it ("the coffee shop"): the determiner is before that
            while (
                j > 0
                and i - j <= 2
                and lowered[j].isalpha()
                and lowered[j] not in _COMPOUND_STOP
                and (english_word_classes(lowered[j]) or {"X"}) <= _NOMINAL
            ):
                j -= 1
            before = lowered[j] if j >= 0 else ""
            if before in ("my", "our"):
                return False  # the user's own: a label ("my sister Anna", "my hobby is …")
            if before not in _DETERMINER and verbal:
                return False  # a verb of the user's (or a word that can be one), said as such
    return said


#: what separates the values of a list ("Spark、Airflow和Hive", "Python, Go and Rust")
_LIST_SEP = re.compile(r"\s*(?:、|，|,|；|;|/)\s*")
_LIST_AND = re.compile(r"\s*(?:以及|和|及|与|跟|还有|\band\b|&)\s*", re.IGNORECASE)


def _list_parts(obj: str) -> list[str]:
    """The values an object lists: split at list commas, and at "和/and" where the object is a list
    or both sides are names in Latin letters ("Java和MyBatis"); one part when it is no list."""
    text = obj.strip()
    parts = [x for x in _LIST_SEP.split(text) if x.strip()]
    out: list[str] = []
    for i, part in enumerate(parts):
        pieces = [x for x in _LIST_AND.split(part) if x.strip()]
        listed = len(parts) > 1 and i == len(parts) - 1  # "…、Airflow和Hive"
        latin = (
            len(pieces) > 1
            and all(re.match(r"[A-Za-z0-9]", x.strip()) for x in pieces[1:])
            and re.search(r"[A-Za-z0-9]\S*$", pieces[0].strip())
        )
        out += (
            [x.strip() for x in pieces]
            if len(pieces) > 1 and (listed or latin) and all(len(x.strip()) >= 2 for x in pieces)
            else [part.strip()]
        )
    return out or [text]


#: an object that opens with an adverb and a verb is a clause ("日常用Spark", "主要写React")
_CLAUSE_OBJECT = re.compile(r"^(?:日常|平时|主要|经常|一般|通常|每天|也|还|都|正在|在)+(?:使用|在用|用|写|做|学|玩|吃|喝|去)")
_USE_VERB = re.compile(r"^(?:日常|平时|主要|经常|一般|通常|每天|也|还|都|正在|在)*(?:使用|在用|用)")


def _clean_part(part: str, predicate: str, *, whole: bool = False) -> str | None:
    """A listed value without the words of its predicate it opened with ("日常用Spark" under 使用 ->
    Spark); None when it is a clause ("日常用Spark" under another predicate)."""
    from .supersede import canonical

    text = part.strip()
    if canonical(predicate) in ("使用", "uses") and _USE_VERB.match(text) and not whole:
        rest = _USE_VERB.sub("", text).strip()
        return rest or None
    if _CLAUSE_OBJECT.match(text):
        return None
    return text


def check(
    s: Statement,
    messages: Sequence[Message],
    *,
    names: set[str] = frozenset(),
    self_names: Sequence[str] = (),
    context: Sequence[Message] = (),
) -> Statement | Rejected:  # type: ignore[assignment]
    """One statement, tidied, or why it is rejected."""
    s, past = _tidy(s)
    s = _split_swallowed(s, messages)
    obj = normalize(_DATE_NOTE.sub("", s.object))
    if not obj:
        return Rejected(s, "empty object")
    if _is_self(s.object, ()):  # "李四|是|用户": the user says it of themself ("我叫李四")
        if not (is_alias(s.predicate) or normalize(s.predicate) in {"是", "就是", "即", "is", "am", "are"}):
            return Rejected(s, "the user is no value of another: only a name or an identity")
        said = any(m.role == "user" and _SELF.search(normalize(m.text)) and normalize(s.subject) in normalize(m.text) for m in messages)
        return s if said else Rejected(s, "the user did not say it of themself")
    found = _clauses_saying(obj, messages, " ".join(normalize(m.text) for m in context if m.role == "user"))
    if not found:
        return Rejected(s, "not in the user's own words")
    is_self = _is_self(s.subject, self_names)
    reasons: list[str] = []
    for _sentence, clause, before, earlier in found:
        if _CAUSE.search(_clause_tail(before)) and not _CAUSE.search(normalize(s.predicate)):
            reasons.append("the words give it as a cause, not a value")
            continue
        if _REPORTS.search(_clause_tail(before)):
            reasons.append("the words report what someone thinks or says, not a fact")  # "my mom thinks I wasted…"
            continue
        if is_self and _REQUEST.search(_clause_tail(before)):
            reasons.append("the words ask the assistant for it, not a fact")
            continue
        if (_UNDECIDED.search(_clause_tail(before)) or _undecided_next(_sentence, clause)) and not _asked(clause):
            reasons.append("the words say it is undecided, not a fact or a plan")  # "还在考虑要不要去东京"
            continue
        if _modifier_in(_sentence, s.object.strip()):
            reasons.append("the object names what a noun after it is, not a value")  # "the Denver marathon": Denver
            continue
        if is_self and _plan_of_another(_clause_tail(before)):
            reasons.append("the words give it as someone else's plan, not the user's")  # "公司打算派我去东京"
            continue
        if not is_self and _SELF_AFTER_TOPIC.match(clause[clause.find(obj) + len(obj) :] if obj in clause else ""):
            reasons.append("the words say it of the user")  # "酱牛肉我打算去稻香村买": not 老公's
            continue
        if is_self and _POSSESSED.search(before) and not _HAS.search(normalize(s.predicate)):
            reasons.append("the words name something of the user's, not what the user is or does")
            continue
        if not is_self and _names_own(s.subject, clause, obj):
            reason = None  # said of it in the same clause ("缓存使用Redis", "redis（雷迪斯）只做缓存")
        else:
            reason = _about_subject(s.subject, is_self, earlier, before, names - {obj, normalize(s.subject)}, self_names)
        reason = reason or _asked(clause) or _polarity(s.predicate, clause, before, obj) or _after_object(s.predicate, clause, obj)
        if reason in (None, "past"):
            reason, plan = _mood(clause, before, s.predicate) if reason is None else (reason, "")
            if (
                reason in (None, "past")
                and not _CESSATION.search(clause)
                and not predicate_said(s.predicate, clause, _sentence, obj, before)
            ):
                reason = "the words do not say the predicate"  # ("戒掉了烟" says 抽|烟 ended, unsaid)
            if reason == "past" or (reason is None and not plan and _said_of_before(clause, before, obj, s.subject)):
                return s.model_copy(update={"past": True})
            if reason is None:
                if plan and _EN_WHEN_OBJECT.fullmatch(obj) and not _TIMELY.search(normalize(s.predicate)):
                    reasons.append("the object is when a plan is, not a value")  # "Thinking about the marathon in October"
                    continue
                if plan:
                    return s.model_copy(update={"predicate": _with_plan(plan, s.predicate), "past": past})
                return s.model_copy(update={"past": past}) if past else s
        reasons.append(reason)
    return Rejected(s, reasons[0], found[0][0].strip()[:120])


def _with_plan(plan: str, predicate: str) -> str:
    """The predicate with the clause's plan word before it; a predicate that is that plan word's
    own verb ("think" of "thinking about …") is the plan word alone, not "thinking about think"."""
    words = re.findall(r"[a-z]+", normalize(predicate))
    if plan.isascii() and words and all(_en_stem(w) in {_en_stem(x) for x in re.findall(r"[a-z]+", plan.lower())} for w in words):
        return plan.strip()
    return (plan + predicate)[:60]


#: a clause that reports what someone thinks or says of a person ("my mom thinks I wasted my master's",
#: "我娘天天港我要三十岁之前结婚", "他说他下个月辞职"): an opinion or a saying, no fact of anyone's; not
#: the user telling the assistant ("跟你说我搬家了")
_REPORTS = re.compile(
    r"\b(?:thinks?|thought|says?|said|reckons?|believes?|claims?|insists?)\s+(?:that\s+)?(?:i|i'm|i've|you|he|she|we|they)\b|"
    r"(?<!跟你)(?<!和你)(?<!给你)(?<!对你)(?<!告诉你)(?:说|港|讲|觉得|认为|以为|嫌)(?:我|你|他|她|俺)(?!们?[，,。！？!?]|$)",
    re.IGNORECASE,
)
#: a request to the assistant opening the object's clause: what it asks for is no fact of the
#: user's ("Kindly suggest some weekend activity", "请推荐几个周末活动", "能不能帮我查一下…")
_REQUEST = re.compile(
    r"^\W*(?:(?:so|and|also|then|now)\s+)?(?:please|pls|plz|kindly|can you|could you|would you|will you|can u|could u|"
    r"help me (?:find|pick|choose|plan|write|with)|tell me|give me|suggest|recommend|let me know)\b|"
    r"^\W*(?:那|就|再|也)?(?:请(?![了过假客])|麻烦你?|能不能|能否|可不可以|你能|你可以|求|给我|你帮我|能帮我|可以帮我|帮我(?!们))",
    re.IGNORECASE,
)
#: a predicate that reports words or a belief: what follows is someone's saying, no fact
#: ("医生说至少三个月不能跑", "听说游泳对哮喘好", "the physio reckons I'm done"); advice stays (建议)
_REPORTED = re.compile(
    r"(?:听说|据说|(?<![小解演传学])说|说过|讲|认为|以为)$|\b(?:reckons?|says|said|thinks|thought|heard|told|claims?|believes?)$",
    re.IGNORECASE,
)
#: an English object with a subject pronoun or "it" in it is a clause, not a value ("some weeks I
#: really feel it", "been doing it since college"); case kept: "IT" is a department
_EN_CLAUSE = re.compile(r"\b(?:I|I'm|I've|I'd|we|he|she|they|you|it)\b")


def _ended_in_one_message(obj: str, cessation: str, messages: Sequence[Message]) -> bool:
    """Whether a user turn says the object and, after it, the cessation with nothing after it in
    its clause ("…喝两杯咖啡，上个月戒了"): the cessation ends that object."""
    for m in messages:
        text = normalize(m.text)
        at = text.find(obj)
        if m.role != "user" or at < 0:
            continue
        for clause in _CLAUSE.split(text[at + len(obj) :]):
            if cessation in clause:
                return _VERB_END_ZH.match(clause[clause.find(cessation) + len(cessation) :]) is not None
    return False


#: synonym groups whose name is a category a model may give a value said with another verb
#: ("在腾讯做产品经理" -> 职业=产品经理): their spellings need not be said
_LABEL_GROUPS = frozenset({"职业", "工作单位", "名字", "年龄", "时间"})
#: the profile's category names a statement may use though the words do not say them ("我养了一只
#: 柴犬" -> 宠物=柴犬), also as the tail of a said word ("体检时间" of "我体检定在下周四"); any other
#: predicate must be said (not kin: "儿子=愁这个" of "我儿子…，我就愁这个" passed as one)
_LABELS = frozenset(
    [
        "爱好",
        "兴趣",
        "宠物",
        "专业",
        "学校",
        "家乡",
        "老家",
        "籍贯",
        "生日",
        "城市",
        "地址",
        "学历",
        "身份",
        "国籍",
        "母语",
        "性别",
        "工作",
        "职务",
        "公司",
        "时间",
        "日期",
        "地点",
        "名称",
        "用途",
        "价格",
        "目标",
        "昵称",
        "品牌",
        "型号",
        "颜色",
    ]
)
#: a copula, and what says one in Chinese ("在厦门做自由译者" is 是|自由译者)
_COPULAS = frozenset({"是", "就是", "为", "即", "属于"})
_COPULA_SAID = re.compile(r"(?<![要若但可于只凡或总倒])是|当|做|作为|担任|成为|成了|叫|属于")  # not 要是, 但是
#: each synonym group's spellings, by the group's name ("住在": 住, 搬到, 定居…)
_SPELLINGS: dict[str, frozenset[str]] = {name: frozenset(k for k, v in SYNONYMS.items() if v == name) for name in set(SYNONYMS.values())}
#: what may stand beside a verb inside one of jieba's words ("开了", "在做", "也是")
_VERB_BESIDE = set("了过着在正也还都又就")


#: a count after a verb that jieba's dictionary writes with it ("喝一杯", "吃两碗")
_COUNT_AFTER = re.compile(r"[了过]?[一二两三四五六七八九十几半]+[个杯口碗瓶次顿趟遍下本根支包张只件条块份盒罐听]")


def _word_in(word: str, clause: str) -> bool:
    """Whether ``clause`` says ``word`` as a word of its own: somewhere not strictly inside one of
    its words (aspect particles and light adverbs aside: "开" in "开了")."""
    spans = word_spans(clause) if word in clause else []
    at = clause.find(word)
    while at >= 0:
        end = at + len(word)
        inside = [
            (s, e)
            for s, e in spans
            if s <= at
            and end <= e
            and (s, e) != (at, end)
            and not set(clause[s:at] + clause[end:e]) <= _VERB_BESIDE
            and not (s == at and _COUNT_AFTER.fullmatch(clause[end:e]))  # "喝一杯": 喝 and a count
        ]
        if not inside:
            return True
        at = clause.find(word, at + 1)
    return False


def predicate_said(predicate: str, clause: str, sentence: str = "", obj: str = "", before: str = "") -> bool:
    """Whether the clause that says the object, or another clause of its ``sentence`` that says it
    too, says the statement's (Chinese) predicate (see the module's contract). A verb must be said
    in that clause; a noun that names the attribute ("换教练", "是笔名") anywhere in the sentence.
    An English predicate's words must be said in the sentence (``_en_predicate_said``), or for a
    sentence that says a change ("I switched to kombucha"), in the turn before it (``before``)."""
    if normalize(predicate).isascii():
        return _en_predicate_said(predicate, (before + " " if change_cue(sentence) else "") + (sentence or clause))
    if predicate_in_clause(predicate, clause, sentence, obj):
        return True
    others = [c for c in _CLAUSE.split(normalize(sentence)) if c.strip() and obj and obj in c and c != clause]
    return any(predicate_in_clause(predicate, c, sentence, obj) for c in others)


#: English verbs too light to say what the relation is: the object and the other checks decide
_EN_LIGHT_VERBS = frozenset(
    {"is", "am", "are", "was", "were", "be", "been", "being", "has", "have", "had", "do", "does", "did", "get", "gets", "got"}
    | {"make", "makes", "made", "go", "goes", "went", "take", "takes", "took", "keep", "keeps", "own", "owns", "owned", "user"}
    | {"also", "now", "currently", "still", "not", "no", "longer", "used", "plan", "plans", "planned", "planning", "going", "gonna"}
    | {"want", "wants", "wanted", "hope", "hopes", "intend", "intends", "consider", "considering", "thinking", "might", "maybe"}
    | {"will", "would", "like"}
)


#: "used to" / "get used to": a time or a habit, never the verb "use"
_USED_TO = re.compile(r"\bused to\b")


def _en_predicate_said(predicate: str, sentence: str) -> bool:
    """Whether the sentence that says the object says one of an English predicate's words (by its
    stem: "runs" of "I run"), unless the predicate is a spelling of a known relation ("lives in"),
    a name, or only light words ("is", "has"). "User|dead quiet|Leeds" of "I run a little bike
    shop in Leeds" said nothing of being quiet; "User|afford|rent" of "… to cover the rent". "Used
    to" says when, not a use: "User|uses|Vancouver" of "I used to live in Toronto" is not said."""
    p = normalize(predicate)
    whole = normalize(sentence)
    said = _USED_TO.sub(" ", whole)
    if is_alias(predicate):
        return True
    if p in SYNONYMS or canonical(p) != p:  # a known relation: any of its spellings, said outside "used to"
        group = SYNONYMS.get(p, canonical(p))
        # "uses" is a verb's own relation: one of its spellings must be said ("User|uses|Porto" of
        # "260 km from Porto" is not); the others may be said as a copula ("I'm a nurse")
        if said == whole and group != "uses":
            return True
        return any(_en_words_said(x, said) for x in _SPELLINGS.get(group, frozenset({p})))
    return _en_words_said(p, said)


def _en_words_said(predicate: str, said: str) -> bool:
    """Whether ``said`` says one of the predicate's words that are not light (by its stem)."""
    words = [w for w in re.findall(r"[a-z]+", predicate) if len(w) >= 3 and w not in _EN_LIGHT_VERBS and not _LIGHT.fullmatch(w)]
    stems = [_en_stem(w) for w in words]
    return not stems or any(re.search(rf"\b{re.escape(x)}", said) for x in stems)


def _en_stem(word: str) -> str:
    """The first letters of an English word without its inflection ("runs" -> "run", "studies" ->
    "stud", "finished" -> "fini"): what a sentence that says the word starts a word with."""
    for suffix, keep in (("ies", 3), ("ing", 4), ("ed", 3), ("s", 3)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            word = word[: -len(suffix)]
            break
    return word[:4]


def predicate_in_clause(predicate: str, clause: str, sentence: str = "", obj: str = "") -> bool:
    """``predicate_said`` for one clause."""
    from .supersede import canonical, changed_noun

    p = normalize(predicate)
    if not any("\u3400" <= ch <= "\u9fff" for ch in p) or is_alias(predicate):
        return True
    whole = normalize(sentence) or clause
    core = (_ADVERBS.sub("", p) or p).lstrip("的") or p
    plan = _PLAN_IN_PREDICATE.match(core)
    if plan and plan.end() == len(core):  # "计划|搬到杭州": the object holds the verb; the mood check decides
        return True
    if plan and plan.end() < len(core) and (_PLAN.search(clause) or _FUTURE.search(clause)):  # "下个月搬到…": 计划搬到
        core = _ADVERBS.sub("", core[plan.end() :]) or core[plan.end() :]
    core = core.rstrip("了过着") or core
    if len(core) > 1 and core[0] == "是" and core not in SYNONYMS:  # "是笔名" of "莫尔索是小李的笔名"
        rest = core[1:]
        return bool(_COPULA_SAID.search(clause)) and (rest in _LABELS or rest in whole)
    if len(core) > 2 and core[-1] in "是为" and core not in SYNONYMS:  # "职业是", "的名字为" (not "用的是")
        core = core[:-1]
    name = SYNONYMS.get(core) or canonical(core)
    group = _SPELLINGS.get(name, frozenset())
    if name in _LABEL_GROUPS or core in _LABELS or name in _LABELS:
        return True
    if any(core.endswith(x) and core[: -len(x)] in whole for x in _LABELS if len(core) > len(x)):
        return True  # "体检时间" of "我体检定在下周四上午"
    noun = changed_noun(core)
    if noun and noun in whole:  # "换教练" of "我换教练了"
        return True
    for spelling, group_name in SYNONYMS.items():  # "缓存使用" of "缓存改用Memcached": the noun said, the verb respelt
        respelt = len(core) > len(spelling) and core.endswith(spelling) and core[: -len(spelling)] in whole
        if respelt and any(_word_in(k, clause) for k in _SPELLINGS[group_name]):
            return True
    if core in _COPULAS:  # said before the object: "在一家外贸公司做单证" says no 是=外贸公司
        at = clause.find(obj) if obj else -1
        return any(m.start() < at for m in _COPULA_SAID.finditer(clause)) if at >= 0 else bool(_COPULA_SAID.search(clause))
    if any(_word_in(x, clause) for x in group) or (name == "使用" and bool(obj) and "是" + obj in clause):  # "缓存是Redis"
        return True
    if "我" in core or "的" in core or len(core) > 6 or (len(core) > 2 and _AS_TIME.fullmatch(core)):
        return False
    if _word_in(core, clause):
        # "退休前在公交公司卖票": 退休 says when, not what the company is ("结婚后住在…", "毕业时…")
        return any(not re.match(_AFTER_AS_TIME, clause[m.end() :]) for m in re.finditer(re.escape(core), clause))
    # "用于" of "缓存使用Redis", "住到" of "住在": the verb without its preposition, or its spellings
    bare = core[:-1] if len(core) > 1 and core[-1] in "在到于给成为作" else ""
    bare_name = SYNONYMS.get(bare, "")
    return bool(bare) and (_word_in(bare, clause) or any(_word_in(k, clause) for k in _SPELLINGS.get(bare_name, ())))


#: what after a verb makes it a time ("退休前", "结婚以后", "毕业时"), or a predicate that is one
_AFTER_AS_TIME = r"(?:之|以)?(?:前(?![台面天年途景端夕线往去进锋])|后(?![来悔面续台端勤期半天年院座排方]))|的?时候?(?![间刻代尚髦装])"
_AS_TIME = re.compile(rf"(?:[\u4e00-\u9fff]{{2,4}}?)?(?:{_AFTER_AS_TIME})")


#: the object right after "my"/"我的": a thing of the user's ("my dentist appointment"), which only
#: a predicate of having can take ("User|is|dentist" of it is no fact)
_POSSESSED = re.compile(r"(?:\b(?:my|our)\s+|我的|我们的|咱们的)$", re.IGNORECASE)
#: what the words give as a cause ("because of paperwork", "因为下雨"): no value of the subject
_CAUSE = re.compile(
    r"(?:\bbecause of|\bdue to|\bthanks to|\bowing to|因为|由于|多亏)\s*(?:(?:the|a|an|my|our|his|her|their|some|all (?:the|that))\s+)?$",
    re.IGNORECASE,
)
_HAS = re.compile(r"有|拥有|养|\b(?:has|have|had|owns?|owned)\b", re.IGNORECASE)


def _tidy(s: Statement) -> tuple[Statement, bool]:
    """Time words out of the predicate; whether one said the value is past ("以前住")."""
    predicate = _DATE_NOTE.sub("", s.predicate).strip()
    past = False
    for _ in range(3):
        if _PAST_WORDS.search(predicate):
            past = True
            predicate = _PAST_WORDS.sub("", predicate).strip()
        stripped = _TIME_WORDS.sub("", predicate).strip()
        if stripped == predicate or not stripped:
            break
        predicate = stripped
    obj = s.object.strip()
    if obj and normalize(obj) in normalize(predicate) and normalize(predicate) != normalize(obj):
        predicate = predicate.replace(obj, "").strip(" ：:，,的") or predicate  # "喜欢Python|Python"
    return (s.model_copy(update={"predicate": predicate}) if predicate != s.predicate else s), past


def _split_swallowed(s: Statement, messages: Sequence[Message]) -> Statement:
    """A predicate that is a relation word plus its own value, as the user said them together
    ("住在上海" of "我叫王磊，住在上海，在招商银行…", given the object 招商银行): the relation and that
    value; the object it was given belongs to another relation, unknown here."""
    predicate = normalize(s.predicate)
    for head in _HEADS:
        rest = predicate[len(head) :]
        if predicate.startswith(head) and len(rest) >= 2 and any(predicate in normalize(m.text) for m in messages if m.role == "user"):
            return s.model_copy(update={"predicate": s.predicate.strip()[: len(head)], "object": s.predicate.strip()[len(head) :]})
    return s


def _clauses_saying(obj: str, messages: Sequence[Message], before: str = "") -> list[tuple[str, str, str, str]]:
    """(sentence, clause, the turn's text before the object, the user's earlier turns) for each
    clause of the user's turns that says the object: whole, or most of its words (Chinese:
    characters)."""
    out = []
    said = before
    for m in messages:
        if m.role != "user":
            continue
        said += " " + normalize(m.text)
        for sentence in split_text(m.text):
            text = normalize(sentence)
            at = text.find(obj)
            if at < 0:
                clauses = [c for c in _CLAUSE.split(text) if c.strip()]
                best = max(clauses, key=lambda c: overlap(obj, c), default="")
                if not best or overlap(obj, best) < OBJECT_OVERLAP:
                    continue
                # where the object's words start in that clause: what comes before them there
                # (the clause's own subject: "他想五一去云南旅游") is before the object
                first = min((best.find(ch) for ch in obj if ch.strip() and ch in best), default=0)
                at = text.find(best) + max(0, first)
            start = max((i.end() for i in _CLAUSE.finditer(text, 0, at)), default=0)
            end = next((i.start() for i in _CLAUSE.finditer(text, at)), len(text))
            # the turn so far: a pronoun or a dropped subject in this sentence refers back into it
            earlier = normalize(m.text)[: max(0, normalize(m.text).find(text))]
            out.append((sentence, text[start : end + 1], earlier + " " + text[:at], said[: -len(normalize(m.text)) - 1]))
    return out


def _is_self(subject: str, self_names: Sequence[str]) -> bool:
    return entity_key(subject) == SELF_KEY or normalize(subject) in {normalize(n) for n in self_names}


def _about_subject(subject: str, is_self: bool, earlier: str, before: str, names: set[str], self_names: Sequence[str]) -> str | None:
    """None when the words before the object say it of the subject; else why not. The subject
    is the last anchor before the object: its name (or a pronoun after its name), or for the user
    "我/I" or none at all (a dropped subject); another name or another person ("我妹妹", "他")
    after it means the words speak of them. A sentence that names no one goes on with what the
    user spoke of before (``earlier``): "我正在开发一个知识中台" … "后端使用SpringBoot"."""
    subject_n = normalize(subject)
    own = {subject_n, *(n for n in (_bare(subject_n),) if n)} | ({normalize(n) for n in self_names} if is_self else set())
    own.discard("")
    others: list[tuple[int, str]] = []  # (end, text) of what names someone or something else
    for m in _OTHER_PERSON.finditer(before):
        others.append((m.end(), m.group(0)))
    for m in _BARE_KIN.finditer(before):
        if not any(m.group(0) in o for o in own):
            others.append((m.end(), m.group(0)))
    others.extend(_en_doers(before))
    for m in _NAMED.finditer(before):
        # "一家电商公司" is a company introduced, not one named: no subject ("去了杭州一家电商公司")
        if not _INDEFINITE.search(before[max(0, m.start() - 2) : m.end()]) and not any(o in m.group(0) or m.group(0) in o for o in own):
            others.append((m.end(), m.group(0)))
    for name in names - own:
        if not any(name in o or o in name for o in own):
            others.extend((m.end(), name) for m in re.finditer(re.escape(name), before))
    # a person the words name as the one who does it ("老秦也交了作品，拍的海边日出": 老秦 拍, not
    # the user); one named after a preposition or a verb ("我和老王去钓鱼", "陪张姐") is not it, nor
    # a kin word's name (the kin word is the one named)
    for start, end, name in (*person_names(before), *_nicknames(before)):
        after_kin = _ENDS_WITH_KIN.search(before[:start]) is not None  # "我妹妹小雨": the sister's name
        if not any(name in o or o in name for o in own) and before[start - 1 : start] not in _WITH and not after_kin:
            others.append((end, name))
    mine = [m.end() for o in own for m in re.finditer(re.escape(o), before)]
    if is_self:  # "我" right before the object is its owner ("带我侄子"), not the one who does it
        mine += [m.end() for m in _SELF.finditer(before) if not _possessive(before, m.start()) and m.end() < len(before.rstrip())]
    elif mine:  # a pronoun after the subject's own name refers back to it, unless two were named before it
        first = min(mine)
        pronouns = [
            (m.end(), m.group(0))
            for m in _PRONOUN.finditer(before)
            if m.start() >= first and len(_named_before(before[: m.start()], names | own, self_names)) < 2
        ]
        mine += [end for end, _ in pronouns]
        theirs = {end for end, _ in pronouns}
        others = [(end, text) for end, text in others if not _PRONOUN.fullmatch(text) or end < first or end not in theirs]
    topic = is_self or not others and any(o in earlier for o in own)
    anchor = max(mine, default=0 if topic else None)
    if anchor is None:
        return "the words do not name the subject"
    later = [text for end, text in sorted(others) if end > anchor]
    return f"{_SAID_OF}{later[-1]}" if later else None


_EN_COPULAS = frozenset({"is", "am", "are", "was", "were", "be", "is a", "is an", "am a", "am an"})
_EN_COPULA_SAID = r"(?:\bi'm|\bi am|\bi was|\bwe're|\bwe are|\bwe were|\bis|\bare|\bwas|\bwere|'s|'re)\s+(?:(?:a|an|the|now|still|currently|also|just|really|pretty|very|so|from)\s+)*"


def _copula_says(obj: str, messages: Sequence[Message]) -> str | None:
    """Why "X is <obj>" is not what the user's words say, or None: the object must follow a
    copula ("I'm a nurse", "I'm 34", "we're vegetarian"), not be said elsewhere ("I moved to
    Vancouver" is no `User|is|vancouver`), and not be a verb in progress ("I'm now working at …"
    is no `User|is|working`)."""

    o = normalize(obj)
    if o.endswith("ing") and " " not in o and "VERB" in english_word_classes(o):
        return "a verb in progress, not what the subject is"
    said = re.compile(_EN_COPULA_SAID + re.escape(o) + r"\b")
    if any(m.role == "user" and said.search(normalize(m.text)) for m in messages):
        return None
    return "the words do not say it is"


def _en_topic(s: Statement, messages: Sequence[Message]) -> bool:
    """Whether an English predicate is a noun phrase of the user's words that does what the object
    says: the object is the verb said right after it ("the new organiser only ever plays Catan" gave
    "User|new organiser|plays"); "a new coach now, Priya" names a value, kept."""

    p, obj = normalize(s.predicate), normalize(s.object)
    verb = obj.split()[0] if obj.split() else ""
    if not p.isascii() or not verb.isalpha() or not verb.endswith(("s", "ed")) or "VERB" not in english_word_classes(verb):
        return False
    said = re.compile(rf"\b{re.escape(p)}\s+(?:(?:{_EN_FREQUENCY_SAID})\s+)*{re.escape(verb)}\b")
    return any(m.role == "user" and said.search(normalize(m.text)) for m in messages)


#: a determiner that opens an English noun phrase of someone or something else
_EN_DETERMINER = re.compile(r"\b(?:the|this|that|his|her|their|your)\s+")  # not "our": the user's own ("our backend")
_EN_FREQUENCY = frozenset(
    {"only", "ever", "also", "still", "now", "usually", "always", "never", "just", "really", "often"} | {"sometimes", "mostly", "even"}
)
_EN_FREQUENCY_SAID = "|".join(sorted(_EN_FREQUENCY))


def _en_doers(before: str) -> list[tuple[int, str]]:
    """(end, words) of each English noun phrase that does the verb after it ("the new organiser only
    ever plays Catan": the organiser plays, not the user): a determiner, one to three words that end
    in a noun, adverbs, and a verb of a third person ("plays", "played") or of a plural ("the kids
    love")."""

    out = []
    for m in _EN_DETERMINER.finditer(before):
        span = re.split(r"[;,.!?:，。；！？：]", before[m.end() : m.end() + 80], maxsplit=1)[0]  # one clause
        words = [(w.group(0), m.end() + w.end()) for w in re.finditer(r"[a-z]+", span)]
        for k in range(1, min(3, len(words)) + 1):
            noun, end = words[k - 1]
            rest = [w for w, _ in words[k:]]
            while rest and rest[0] in _EN_FREQUENCY:
                rest = rest[1:]
            if not rest:
                break
            verb, nominal = rest[0], english_word_classes(noun)
            if (
                (not nominal or "NOUN" in nominal)
                and "VERB" in english_word_classes(verb)
                and (verb.endswith(("s", "ed")) or noun.endswith("s"))
            ):
                out.append((end, before[m.start() : end]))
                break
    return out


#: an indefinite article or a description inside what looks like a name ("一家电商公司", "做跨境电商的
#: 公司", "a new app"): no name
_INDEFINITE = re.compile(r"一[家个所间座款]|的(?:项目|系统|平台|公司|集团|服务|模块|网站|应用|小程序)$|\b(?:a|an)\b", re.IGNORECASE)
#: what comes before a name that is not the one doing it: a companion, whom it is for or about
_WITH = frozenset("和跟与同陪给对帮找让叫是请带替向被把像的")


def _names_own(subject: str, clause: str, obj: str = "") -> bool:
    """Whether the clause names the subject before the object: a name said only after it is
    another verb's object ("打算调剂去南大": 南大 does not 调剂)."""
    n = normalize(subject)
    at = clause.find(obj) if obj else -1
    said = clause[:at] if at > 0 else clause
    return any(x and x in said for x in (n, _bare(n)))


def _possessive(text: str, at: int) -> bool:
    """Whether the "我" at ``at`` is part of what the sentence says of someone ("张伟是我们部门的…",
    "…给我的建议"), not its subject."""
    return at > 0 and text[at - 1] in "是的为给和跟与对被把让"


#: names a sentence gives things without capitals: "星图项目", "天枢系统", "the Atlas project"
_NAMED = re.compile(
    r"[\u3400-\u9fffA-Za-z0-9]{2,6}(?:项目|系统|平台|公司|集团|服务|模块|网站|应用|小程序)|\bthe \w+ (?:project|system|platform|company|service|app|website)\b"
    # a service's identifier ("order-service", "payment_gateway", "auth-api")
    r"|(?<![A-Za-z0-9])[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*[-_](?:service|svc|api|server|gateway|worker|backend|frontend|app|web|sdk|bot|platform|engine|center|hub)(?![A-Za-z0-9])"
)


def _bare(name: str) -> str:
    key = entity_key(name)
    bare = stem(key)
    return bare if bare != name else ""


def _polarity(predicate: str, clause: str, before: str, obj: str = "") -> str | None:
    """None when the predicate and the words agree on yes or no; "past" when the words end the
    value (a cessation the predicate does not carry); else why they disagree. A negation or a
    cessation bears on the object only when it governs it: the words between them are a verb or
    two ("不再做数据分析", "no longer drink soda"), not another value and a new verb ("quit smoking in
    February": February is when, not what ended; "left nursing and joined a startup")."""
    tail = _clause_tail(before)
    p = normalize(predicate)
    sentiment = _SENTIMENT.search(p)
    if sentiment and normalize(sentiment.group(0)) not in normalize(clause):
        return f"the words do not say {sentiment.group(0)}"
    scope = _scope(tail, obj)
    if scope == "unclear":
        return "a negation before it whose scope is unclear"
    words_negate = scope is not None
    ends = scope == "ends" or (words_negate and bool(re.search(r"\b(?:any ?more)\b", clause)))
    predicate_negates = bool(_NEGATION.search(_NOT_NEGATION.sub("", p)))
    # a predicate that says the cessation itself ("quit smoking", "戒掉") states it: it agrees
    predicate_ends = bool(_CESSATION.search(p)) or bool(re.search(r"戒|辞职|离职|退出|卖掉|卖了", p))
    if predicate_negates and not words_negate:
        return "the words do not negate it"
    if words_negate and not (predicate_negates or predicate_ends):
        return "past" if ends else "negated in the user's words"
    return None


#: what may follow a verb at its clause's end: particles, and in English a pronoun for the object
_VERB_END_ZH = re.compile(r"^(?:了|过|掉|啦|吧|呢|哈|啊|嘛|的|咯|喽|呀)*\W*$")
_VERB_END_EN = re.compile(
    r"^(?:\s+(?:it|them|that|this|one|those|these|there))?(?:\s+(?:right now|now|any ?more|at all|either|yet|though|really|honestly))*\W*$"
)
_PLAN_GIVEN_UP = re.compile(r"打算|计划|准备|想|要|\b(?:plan|going|gonna|want)", re.IGNORECASE)
#: a cessation said with a negation after the object: "早就不爬了", "不去了", "再也不喝"
_ENDS_AFTER = re.compile(r"不再|已经不|早就不|早不|再也不|已不|\b(?:no longer|any ?more)\b", re.IGNORECASE)


def _after_object(predicate: str, clause: str, obj: str) -> str | None:
    """The object said before its verb, as a topic ("英国也不打算去了", "爬山早就不爬了", "a second
    shop … we can't afford it"): None when the words after it in its clause do not negate the
    predicate's verb (or the predicate carries the negation itself); "past" when they end it
    ("早就不爬了"); else why not (a plan given up, a negation). The verb must end the clause, or be
    followed only by a pronoun for the object ("afford it"), so the negation is of this object."""
    p = normalize(predicate)
    at = clause.find(obj)
    if at < 0 or _NEGATION.search(_NOT_NEGATION.sub("", p)) or _CESSATION.search(p):
        return None
    after = _NOT_NEGATION.sub(lambda m: "\x00" * len(m.group(0)), clause[at + len(obj) :])
    if p.isascii():
        stems = [w[:4] for w in re.findall(r"[a-z]+", p) if len(w) >= 3 and not _LIGHT.fullmatch(w)]
        hits = [
            (m.start(), m.end())
            for x in stems
            for m in re.finditer(rf"\b{re.escape(x)}[a-z]*", after)
            if _VERB_END_EN.match(after[m.end() :])
        ]
        window_size = 24
    else:
        core = (_ADVERBS.sub("", p) or p).rstrip("了过着掉") or p
        plan = _PLAN_IN_PREDICATE.match(core)
        core = core[plan.end() :] if plan and plan.end() < len(core) else core
        verbs = [core] + ([core[0]] if len(core) >= 2 and (core[0] in _OWN_VERBS or core[1] in "在到于给成") else [])
        hits = [(m.start(), m.end()) for v in verbs for m in re.finditer(re.escape(v), after) if _VERB_END_ZH.match(after[m.end() :])]
        window_size = 6
    for start, _end in hits:
        window = after[max(0, start - window_size) : start]
        negations = list(_NEGATION.finditer(window))
        if not negations or _NEW_PHRASE.search(window[negations[-1].end() :]):
            continue
        if _PLAN_GIVEN_UP.search(window):
            return "a plan the user's words give up"
        if _ENDS_AFTER.search(window) or (not p.isascii() and after.rstrip("。！!，, ").endswith(("了", "啦"))):
            return "past"
        return "negated in the user's words"
    return None


#: a time word that puts what its clause says before now ("我以前住在成都", "俺之前在北京干了五年销售",
#: "I used to live in Denver"); 以前/之前 only as an adverb, not after an event ("睡觉之前看书")
_BEFORE_NOW_ZH = re.compile(
    rf"(?:{_BEFORE_ZH}|早年|当年|那时候?|小时候|年轻时|上学时|读书时|大学时|几年前|多年前|很久以前|好久以前"
    # before an event that has happened to whoever says it: "退休前在公交公司", "来深圳之前在长沙"
    r"|(?:退休|来[\u4e00-\u9fff]{1,4}?|搬[来到过][\u4e00-\u9fff]{1,4}?)(?:之|以)?前)"
)
_BEFORE_NOW_EN = re.compile(
    r"\b(?:used to|previously|formerly|once(?! (?:a|an|every|in|per|or|more|again)\b)|back then|in the past)\b", re.IGNORECASE
)
#: where 以前/之前 is an adverb: at the clause's start, after a subject word or a topic's 的
_ADVERB_AFTER = "我他她俺咱们的也都就你己"
#: words between the time word and the object that keep the value going or make it another
#: verb's ("我之前说过我住在杭州", "之前买的车", "以前就住在这", "原来那家公司")
_NOT_BEFORE_NOW = re.compile(
    r"一直|就|至今|到现在|还|仍|依然|始终|说|讲|提|告诉|讨论|聊|问|打算|计划|准备|想|的|那|这|"
    r"\b(?:said|told|talked|asked|planned|thought|still|always)\b",
    re.IGNORECASE,
)
_FRONTED_BEFORE_NOW = re.compile(r"^(?:的|也|都|我|俺|咱|他|她)*(?:以前|之前|原来|曾经|早先|过去|从前)")


def _said_of_before(clause: str, before: str, obj: str, subject: str) -> bool:
    """Whether the object's clause puts it before now with a time word that governs it: before
    the verb ("俺之前在北京干了五年销售": 北京, 销售), or after an object said first as a topic
    ("埃塞的之前喝过": 埃塞). Nothing between the time word and the object may start another
    phrase, keep the value going, or make it another verb's."""
    tail = _clause_tail(before)
    english = bool(re.search(r"[a-z]", obj)) and not re.search(r"[\u3400-\u9fff]", tail)
    pattern = _BEFORE_NOW_EN if english else _BEFORE_NOW_ZH
    for m in reversed(list(pattern.finditer(tail))):
        ahead = tail[: m.start()]
        adverb = not ahead.strip() or ahead.rstrip()[-1] in _ADVERB_AFTER or ahead.rstrip().endswith(normalize(subject))
        if not english and m.group(0) in ("以前", "之前", "原来", "原先", "过去") and not adverb:
            continue  # after an event: "睡觉之前"
        rest = tail[m.end() :]
        return not (len(rest) > (48 if english else 14) or _NEW_PHRASE.search(rest) or _NOT_BEFORE_NOW.search(rest))
    at = clause.find(obj)
    if at >= 0 and not english:
        after = clause[at + len(obj) :]
        fronted = _FRONTED_BEFORE_NOW.match(after)
        if (
            fronted
            and not _NEW_PHRASE.search(after[: fronted.end() + 6])
            and not _NEGATION.search(after[fronted.end() : fronted.end() + 6])
        ):
            return True
    return False


#: words that start a new verb phrase or clause: a negation before them does not reach past them
_NEW_PHRASE = re.compile(
    r"但是?|而是?|却|然后|现在|如今|改成?|换成?|换了|开始|转而|只是|而且|并且|还是|\b(?:and|but|then|now|instead|so|because|since|after|before|when|while|though|although|yet)\b",
    re.IGNORECASE,
)
#: particles, prepositions and determiners that do not count as words between a verb and its object
_LIGHT = re.compile(
    r"[了过着的地得在到去来再也都还就又把给跟和与向对从的一个这那些种件只位]|\b(?:the|a|an|my|our|your|his|her|their|to|in|at|on|for|with|of|any|some|this|that|these|those|going|doing|being|get|got)\b",
    re.IGNORECASE,
)
#: an object that is a date or a time of day: said when, never what a cessation ends
_WHEN = re.compile(
    r"^\s*(?:\d|[一二三四五六七八九十]+月|(?:上|下|这|本)(?:个?月|周|星期|礼拜)|(?:今|明|去|前|后)(?:年|天)|昨天|大?前天|大?后天|周[一二三四五六日天末]|星期|礼拜|早上|晚上|中午|上午|下午|每天|每周|每月|月[初中底]|年[初中底]"
    r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|last|next|this|yesterday|today|tomorrow|morning|evening|night|noon)\b)",
    re.IGNORECASE,
)


def _scope(tail: str, obj: str = "") -> str | None:
    """What the last negation or cessation of the object's clause does to the object right after
    ``tail``: "ends" (a cessation governs it), "negates" (a negation governs it), None (none, or
    one that governs something else), "unclear" (one with words between that may or may not be its
    object: "不再跟王教授做推荐": dropped, since a wrong memory is worse than none)."""
    text = _NOT_NEGATION.sub(lambda m: "\x00" * len(m.group(0)), tail)
    marks = [(m.start(), m.end(), "ends") for m in _CESSATION.finditer(text)] + [
        (m.start(), m.end(), "negates") for m in _NEGATION.finditer(text)
    ]
    if not marks:
        return None
    start, end, kind = max(marks, key=lambda x: (x[1], x[2] == "ends"))
    # a cessation word inside the match span wins ("不再" is both)
    if kind == "negates" and any(s <= start and e >= end for s, e, k in marks if k == "ends"):
        kind = "ends"
    between = tail[end:]
    if _NEW_PHRASE.search(between):
        return None
    rest = _LIGHT.sub(" ", between)
    words = rest.split() if rest.isascii() else [c for c in rest if not c.isspace()]
    if words and _WHEN.match(obj):
        return None  # "quit smoking in February", "2月中旬戒烟": the date says when it ended
    if len(words) <= 3:
        return kind
    return "unclear"


def _clause_tail(before: str) -> str:
    """The words of the object's own clause before it."""
    cut = max((m.end() for m in _CLAUSE.finditer(before)), default=0)
    return before[cut:]


def _asked(clause: str) -> str | None:
    if clause.rstrip().endswith(("?", "？")) or re.search(r"吗[？?。]?$|呢[？?]?$", clause.strip()):
        return "asked, not said"
    return None


#: words that put a clause in the future without a plan word ("婚礼推迟到明年5月", "next month")
_FUTURE = re.compile(
    r"明年|下个?月|下周|下星期|下礼拜|明天|后天|将来|以后|回头|定在|定于|安排在|推迟到|延期到|延后到|提前到|\b(?:will|next|tomorrow|soon|scheduled|upcoming)\b",
    re.IGNORECASE,
)


#: a plan said as one that was, not is: "本来打算…", "原本想…", "I was going to…", "we had planned to…"
_PLAN_GIVEN_UP_BEFORE = re.compile(
    r"(?:本来|原本|原先)[^，。！？,.!?]{0,6}?(?:打算|计划|准备|想|要)|本(?:打算|想|要)|\b(?:was|were) (?:going|planning|supposed|meant) to\b|\bhad (?:planned|meant|hoped|intended) to\b",
    re.IGNORECASE,
)


def _mood(clause: str, before: str, predicate: str) -> tuple[str | None, str]:
    """(why the clause states no fact, or None; the plan word the predicate must carry, or "").
    A plan word in the predicate that the clause does not say, nor puts in the future ("用户|计划|
    Iceberg" of "我们把Hive换成了Iceberg") is the model's, not the user's: dropped."""
    tail = _clause_tail(before)
    if _HYPOTHETICAL.search(tail):
        return "a supposition, not a fact", ""
    if _PLAN_GIVEN_UP_BEFORE.search(tail):
        return "a plan given up, not a fact", ""  # "本来年后打算在惠州买套房…先不买了"
    if _PLAN_IN_PREDICATE.search(normalize(predicate)) and not (
        _PLAN_IN_PREDICATE.search(clause) or _PLAN.search(clause) or _FUTURE.search(clause)
    ):
        return "the words say no plan", ""
    plan = _PLAN.search(tail)
    if plan and not _PLAN_IN_PREDICATE.search(predicate):
        return None, plan.group(0) + ("" if not plan.group(0).isascii() else " ")
    return None, ""


# ---- cessations: what the user's words end, whether or not the model wrote a statement for it ----


@dataclass(frozen=True, slots=True)
class Cessation:
    """A value the user's words end ("已经不去健身房了": 健身房; "I quit smoking": smoking; "卡罗拉卖给
    了我表弟": 卡罗拉; "从MySQL迁移到了TiDB": MySQL), with the words that say it and the message."""

    object: str
    #: the governed words with their verb ("去健身房", "drink soda"), to match an attribute's name
    phrase: str
    quote: str
    message: Message
    #: whose value it ends: "" for the user's, else the words that name its owner ("他们", "订单服务")
    whose: str = ""


#: words that end what follows them (a cessation's object is the words right after it)
_ENDS_ZH = re.compile(
    r"不再|已经不|已不|再也不|没再|戒掉了?|戒了|戒(?=[\u3400-\u9fff])|辞掉了?|辞去了?|辞了|离开了?|退出了?|放弃了?|停掉了?|停用了?|卸载了?|退掉了?|卖掉了?|取消了?"
    r"|不(?=[去做用玩吃喝抽养学开住练跑打弹看读写上参][^，。！？；]*了)"
)
_ENDS_EN = re.compile(
    r"(?:n't|\bnot|\bnever)\b(?=[^.;]*\bany ?more\b)|\b(?:no longer|quit|quitted|stopped|gave up|give up|given up|left|sold|cancel(?:l)?ed|uninstalled|resigned from|handed (?:in )?(?:my |her |his )?notice(?: in)? at)\b",
    re.IGNORECASE,
)
#: a "不…了" that is about one day, not a habit ended ("今天不去健身房了")
_ONE_OFF = re.compile(r"今天|今晚|明天|这次|这回|这周|本周|周末|下午|晚上|暂时")
#: time words inside a phrase ("思域上周卖掉了": 思域)
_TIME_ANYWHERE = re.compile(
    r"上上?个?(?:月|周|星期|礼拜)|下个?(?:月|周)|这个?(?:月|周)|本(?:月|周)|去年|今年|前年|上周[一二三四五六日天末]?|昨天|前天|今天|刚刚|刚才|最近|前不久|\d{1,4}年(?:\d{1,2}月)?|\d{1,2}月(?:\d{1,2}[日号])?"
)
#: a thing disposed of, named before the verb ("卡罗拉卖给了我表弟", "把卡罗拉卖了")
#: a group that ended, named before its verb: "乐队也散伙了", "球队解散了", "the band split up"
_DISSOLVED = re.compile(
    r"(?:^|(?<=[，,。；;\s]))(?:我们|我的|我那个|我们那个|那个)?([^，,。！？；;\s]{2,8}?)(?:也|都|已经|早就|终于)*(?:散伙|解散|散了|黄了)|"
    r"\b(?:the|our|my)\s+((?:\w+\s+)?\w+)\s+(?:has\s+|have\s+|finally\s+)?(?:split up|broke up|disbanded|folded|fell apart|called it quits)\b",
    re.IGNORECASE,
)
_DISPOSED = re.compile(r"(?:^|把)([^，。！？；]{2,12}?)(?:已经|也|都)?(?:卖给|卖掉|卖了|送给|转让给|转给|退掉|退了)")
#: the old value of a change: "从MySQL迁移到了TiDB", "把Hive换成了Iceberg", "switched from X to Y", "从协和辞职了"
_FROM_ZH = re.compile(
    r"从([^，。！？；从]{1,30}?)(?:全部|都|也)?(?:搬到|搬去|搬回|迁移到|迁移至|迁到|迁往|换成|换到|换为|改成|改为|改用|改到|转到|转去|转成|跳槽到|跳到|跳去|调到|调去|升级到|切换到|切到|辞职|离职|辞了职|离了职)"
)
_SWAP_ZH = re.compile(r"把([^，。！？；把]{1,30}?)(?:全部|都|也)?(?:换成|换为|改成|改为|迁移到|迁到|替换成|替换为|切换到|升级到|升级成)")
_FROM_EN = re.compile(
    r"\b(?:switched|moved|migrated|changed|went|upgraded|transferred)\s+from\s+(?:the\s+|my\s+|our\s+)?([\w .+#-]{2,30}?)\s+to\b|\breplaced\s+(?:the\s+|my\s+|our\s+)?([\w .+#-]{2,30}?)\s+with\b",
    re.IGNORECASE,
)
#: where an English cessation's object ends
_EN_STOP = re.compile(
    r"\s+(?:in|at|on|since|because|and|but|for|last|this|after|when|a|an|any|anymore|any more|altogether|completely|entirely|now|so|then|years?|months?|weeks?|ago)\b.*$",
    re.IGNORECASE,
)
#: a cessation after its object, said first as a topic: "融资的事我早就不管了", "爬山早就不爬了",
#: "奶茶我已经不喝了" (an ending adverb is needed: "香菜我不吃" never held)
_FRONTED_END = re.compile(
    r"^(?P<obj>[^，。！？；\s]{2,14}?)(?:的事儿?|这事儿?|这块|那块|这件事|那件事)?(?:我们?|俺们?|咱们?)?(?:也|都)?"
    r"(?:(?:早就|早已|早|已经|再也|好久|很久)都?(?:没|不)再?|没再|不再|(?:不|没)再?(?:打算|想|准备|计划)|不怎么(?=[\u4e00-\u9fff]{1,2}了))"
    r"(?P<verb>[\u4e00-\u9fff]{1,2}?)(?:过|了|啦)*$"
)
_ZH_LEAD = re.compile(r"^(?:了|掉|再|去|在|用|使用|做|玩|吃|喝|抽|养|学|开|住|练|跑|打|弹|看|读|写|上|参加|跟|和)+")
_ZH_TAIL = re.compile(r"(?:了|啦|吧|呢|了吧|的|这件事|这个习惯)+$")


def said_clauses(messages: Sequence[Message]) -> Iterator[tuple[Message, str, str, str, int]]:
    """(message, sentence, its normalised text, clause, where the clause starts in that text) of
    each clause the user's turns state: not in a question or a supposition, not asked."""
    for m in messages:
        if m.role != "user":
            continue
        for sentence in split_text(m.text):
            text = normalize(sentence)
            if _HYPOTHETICAL.search(text) or text.rstrip().endswith(("?", "？")):
                continue
            at = 0
            for clause in _CLAUSE.split(text):
                start = text.find(clause, at)
                at = start + len(clause)
                if clause.strip() and not _asked(clause):
                    yield m, sentence, text, clause, start


def cessations(messages: Sequence[Message]) -> list[Cessation]:
    """What the user's turns end: the object right after a cessation ("不再", "已经不…了", "戒",
    "退出", "no longer", "quit", "stopped", "sold"), a thing disposed of named before its verb
    ("卡罗拉卖给了我表弟"), and the old value of a change said with "从…到"/"把…换成"/"from … to".
    A negation without an end ("我不吃香菜") ends nothing: it never held. Questions and suppositions
    end nothing either. Each says whose value it ends: the user's, unless the words before it in
    its sentence name someone or something else last ("我妹妹已经不住在杭州了", "他们…不去云南了")."""
    out: list[Cessation] = []
    for m, sentence, text, clause, start in said_clauses(messages):
        for obj, phrase, where in _ended_in(clause, text):
            parts = [x.strip() for x in _list_parts(obj) if x.strip()]
            owner = owner_before(text[: start + where])
            for part in parts:
                if not _WHEN.match(part):
                    out.append(Cessation(part, phrase if len(parts) == 1 else part, sentence.strip()[:200], m, owner))
    return out


def owner_before(before: str) -> str:
    """Whose value a cessation after ``before`` ends: "" for the user's (the last one named is
    "我/I", or no one: a dropped subject), else the words of the last other one named."""
    anchors = [(x.end(), "") for x in _SELF.finditer(before) if not _possessive(before, x.start())]
    anchors += [(x.end(), x.group(0)) for x in _OTHER_PERSON.finditer(before)]
    anchors += [(x.end(), x.group(0)) for x in _NAMED.finditer(before)]
    anchors += [(x.end(), x.group(0)) for x in _BARE_KIN.finditer(before)]  # "妈妈早就不上班了"
    return max(anchors, default=(0, ""))[1]


def _ended_in(clause: str, sentence: str = "") -> list[tuple[str, str, int]]:
    """(object, governed phrase, where the cessation starts) of each cessation in one clause."""
    found: list[tuple[str, str, int]] = []
    for pattern in (_FROM_ZH, _SWAP_ZH):
        for m in pattern.finditer(clause):
            found.append((m.group(1).strip(), m.group(1).strip(), m.start()))
    for m in _FROM_EN.finditer(clause):
        value = (m.group(1) or m.group(2) or "").strip()
        if value:
            found.append((value, value, m.start()))
    for m in _DISSOLVED.finditer(clause):  # "乐队也散伙了", "the band split up"
        group = _TIME_ANYWHERE.sub("", next((g for g in m.groups() if g), "")).strip()  # "乐队上个月解散了"
        if _GROUP.search(group):
            found.append((group.strip(), group.strip(), m.start()))
    for m in _DISPOSED.finditer(clause):
        value = _TIME_ANYWHERE.sub("", re.sub(r"^(?:我们?|已经|也|都|还)+", "", m.group(1).split("把")[-1].strip())).strip()
        value = re.sub(r"^(?:我们?|已经|也|都|还)+", "", value).strip()
        if len(value) >= 2:
            found.append((value, value, m.start()))
    if found:
        return found
    fronted = _FRONTED_END.match(clause.strip())
    if fronted and not _ONE_OFF.search(sentence or clause):
        raw, verb = fronted.group("obj"), fronted.group("verb")
        topic = re.sub(r"^(?:我们?|俺们?|咱们?)", "", raw).strip()
        obj = topic[len(verb) :] if topic.startswith(verb) and len(topic) > len(verb) else topic
        someone = (
            _OTHER_PERSON.search(raw)
            or _SELF.search(topic)
            or re.fullmatch(_KIN, topic)
            or re.fullmatch(r"[老小阿][\u4e00-\u9fff]", topic)
            or person_names(topic)
        )
        if obj and not someone and not _NEW_PHRASE.search(topic):  # a person said first is the subject
            return [(obj, topic, 0)]
    zh = [m for m in _ENDS_ZH.finditer(clause) if not (m.group(0) == "不" and _ONE_OFF.search(sentence or clause))]
    if zh:
        phrase = _ZH_TAIL.sub("", clause[zh[-1].end() :]).strip()
        obj = _ZH_LEAD.sub("", phrase).strip()
        if obj and not _NEW_PHRASE.search(phrase):
            found.append((obj, phrase, zh[-1].start()))
    en = [
        m
        for m in _ENDS_EN.finditer(clause)
        if not (
            m.group(0) == "left" and re.match(r"\s+(?:my|our|the|his|her)\s+\w+(?:\s+\w+)?\s+(?:at|in|on|with|behind)\b", clause[m.end() :])
        )
    ]
    if en:
        phrase, obj = _en_object(clause[en[-1].end() :])
        if obj and len(obj.split()) <= 4:
            found.append((obj, phrase, en[-1].start()))
    return found


_EN_VERB = re.compile(
    r"^(?:work|live|drink|eat|play|use|go|went|smoke|take|do|see|visit|attend|run|own|have|drive|teach|study|date|watch|read|write|wear|ride|practi[cs]e|train|follow|buy|cook|grow|keep|date|volunteer|coach|sing)(?:s|es|ed|d|ing)?$|^(?:going|doing|being|having|smoking|drinking|eating|playing|using|working|living|running|driving|teaching|dating)$",
    re.IGNORECASE,
)
_EN_FILL = re.compile(r"^(?:(?:my|our|the|a|an|to|at|in|on|for|with|from|of|any|some)\s+)+", re.IGNORECASE)


def _en_object(after: str) -> tuple[str, str]:
    """(the governed phrase, its object) of the words after an English cessation: a verb first is
    dropped ("drink soda" -> soda, "works at Google" -> Google, "going to the gym" -> gym) unless
    nothing but a time is left ("smoking in February" -> smoking)."""
    words = after.strip(" .!").split()
    if not words:
        return "", ""
    verb = words[0] if _EN_VERB.match(words[0]) else ""
    rest = _EN_FILL.sub("", " ".join(words[1:] if verb else words) + " ").strip()
    obj = "" if not rest or _WHEN.match(rest) else _EN_STOP.sub("", " " + rest).strip(" .!")
    if not obj:
        return verb, verb
    return (f"{verb} {obj}" if verb else obj), obj


def stem_words(text: str) -> set[str]:
    """English words as stems ("smoking", "smokes", "smoke" -> "smok"; "nursing", "nurse" -> "nurs")."""
    out = set()
    for w in re.findall(r"[a-z]+", text.casefold()):
        for suffix in ("ing", "ers", "er", "es", "ed", "s", "e"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        out.add(w)
    return out - {"the", "a", "an", "my", "our", "to", "at", "in", "of", "for", "and"}


def ends_value(c: Cessation, predicate: str, value: str) -> bool:
    """Whether a cessation ends a stored value: the value is the thing it ended, or that thing's
    head ("卡罗拉" of "2015年的卡罗拉", "篮球队" of "公司的篮球队"), or is said of it ("健身房的会员",
    "membership at the gym"); or the value's predicate is the verb and its object ("抽烟" for 戒烟,
    "smokes" for "quit smoking"). A name that only begins with it is another thing ("北京大学" is
    not ended by "离开北京", nor "Beijing" by "quit my Beijing job"). A predicate that itself negates
    or ends ("no longer drink", "戒烟", "退出") states the cessation: never ended by it."""
    p, v, o = normalize(predicate), normalize(_DATE_NOTE.sub("", value)), normalize(c.object)
    if not v or not o:
        return False
    if _NEGATION.search(_NOT_NEGATION.sub("", p)) or _CESSATION.search(p) or re.search(r"戒|辞职|离职|退出|卖掉|卖了", p):
        return False
    if o.isascii() and v.isascii():
        ov, vv = _stems(o), _stems(v)
        if not ov or not vv:
            return False
        if (
            ov == vv
            or (set(vv) <= set(ov) and vv[-1] == ov[-1])
            or (
                set(ov) <= set(vv)
                and (vv[-1] == ov[-1] or re.search(r"\b(?:of|at|in|with|for)\s+(?:the\s+|a\s+|my\s+)?" + re.escape(o.split()[0]), v))
            )
        ):
            return True
        pv, said = stem_words(p), _stems(c.phrase)
        if len(said) > len(ov) and said[0] in pv and set(ov) <= set(vv):
            return True  # "stopped playing chess" for "plays=chess club": the same verb, a longer name
        return len(ov) == 1 and ov[0] in pv and ov[0] not in vv and len(said) == 1
    if (
        v == o
        or o.endswith(v)
        and len(v) >= 2
        or v.endswith(o)
        and len(o) >= 2
        or (len(o) >= 2 and (v.startswith(o + "的") or "的" + o in v))
    ):
        return True
    phrase = normalize(c.phrase)
    if p and phrase.startswith(p) and len(phrase) > len(p) and len(o) >= 2 and (v.startswith(o) or o.startswith(v)):
        return True  # "不做推荐了" for "做=推荐系统": the same verb, the name said short
    if len(o) == 1 and 2 <= len(v) <= 6 and v.endswith(o) and v not in normalize(c.quote):
        # a kind of the one-character thing ended ("戒酒" ends 喝=精酿啤酒, "不再打球" 打=篮球: the head
        # of a Chinese word is its end), under the verb said with it when one was ("看=篮球" stays);
        # a kind named beside the cessation is said apart from it ("戒酒了，不过啤酒偶尔还喝")
        verb = phrase[: -len(o)] if phrase.endswith(o) else phrase
        return not verb or bool(p) and (p in verb or verb in p)
    # "抽烟=每天早上" for 戒烟: the predicate is a verb and the ended object
    return len(p) <= len(o) + 2 and p.endswith(o) and p != o


def _stems(text: str) -> list[str]:
    """The stems of an English phrase's words, in order (see ``stem_words``)."""
    out = []
    for w in re.findall(r"[a-z0-9]+", text.casefold()):
        stem = next(iter(stem_words(w)), "")
        if stem:
            out.append(stem)
    return out


#: a clause that opens with how often or how mostly: it tells how the clause before it is done
#: ("我是健身房的会员，每周去三次，主要练力量": the training is the gym's)
_HOW = re.compile(
    r"^(?:主要|大多|多半|平时|平常|一般|通常|经常|常常|每天|每周|每星期|每月|每次|每年|"
    r"mostly|mainly|usually|normally|often|always|every|each|twice|three times|once)",
    re.IGNORECASE,
)


def goes_with(sentence: str, ended: str, value: str, *, role: bool = False) -> bool:
    """Whether ``value`` was said as a part of ``ended`` and ends with it: in ``sentence``, the
    sentence that said ``ended``, ``value`` is in a later clause, and each clause from the one after
    ``ended``'s up to ``value``'s opens with how often or how mostly and names no one
    ("我是健身房的会员，每周去三次，主要练力量": 已经不去健身房了 ends 练=力量 and 每周去三次), or,
    after a group ("乐队", "band"), with "we" (the group's doings: "…in a cover band, we rehearse on
    Sundays"). A
    clause with a subject or a setting of its own ("…，我住在浦东", "…，住在浦东") is another fact
    and stays; so does anything said before ``ended``. With ``role`` (the words ended a job: 辞职,
    离职, resigned, quit), the role held there, said in ``ended``'s clause right after it, ends too
    ("在协和医院当护士", "at Mercy Hospital as a nurse")."""
    text, e, v = normalize(sentence), normalize(ended), normalize(value)
    if not e or not v or e == v:
        return False
    clauses = [c.strip() for c in _CLAUSE.split(text)]
    first = next((i for i, c in enumerate(clauses) if e in c), None)
    last = next((i for i, c in enumerate(clauses) if v in c or _within(v, c)), None)
    if first is None or last is None or last < first:
        return False
    if last == first:
        clause = clauses[first]
        between = clause[clause.find(e) + len(e) : clause.find(v)] if clause.find(v) > clause.find(e) else None
        return role and between is not None and bool(_ROLE_AT.fullmatch(between.strip()))
    group = bool(_GROUP.search(e))
    return all(
        (_HOW.match(c) and not _SELF.search(c) and not _OTHER_PERSON.search(c) and not re.search(r"住|在|\b(?:at|in|live)\b", c))
        or (group and _WE.match(c) and not _OTHER_PERSON.search(c))
        for c in clauses[first + 1 : last + 1]
    )


#: a group one belongs to: what "we" do right after it is said is the group's, and ends with
#: the user's part in it ("I play bass in a cover band, we rehearse on Sundays" … "I quit the band")
_GROUP = re.compile(
    r"乐队|乐团|球队|战队|社团|俱乐部|合唱团|剧团|读书会|跑团|车队|\b(?:band|team|club|choir|orchestra|troupe|league|crew|squad|ensemble)\b",
    re.IGNORECASE,
)
_WE = re.compile(r"^(?:我们|咱们|俺们|we\b)", re.IGNORECASE)


#: the words between a workplace and the role held there: "医院当", "公司做", "as a", "working as"
_ROLE_AT = re.compile(r"[\u3400-\u9fff]{0,4}?(?:当|做|担任|任|干)(?:一名|一个|了)?|(?:working |employed )?as(?: an?| the)?", re.IGNORECASE)
#: words that end a job: the role held at the place ends with it
RESIGNED = re.compile(r"辞职|离职|辞掉|辞去|辞了|\b(?:resigned|quit)\b", re.IGNORECASE)


def _within(value: str, clause: str) -> bool:
    """A Chinese value said with a word inside it ("每周三次" in "每周去三次")."""
    if value.isascii() or len(value) < 3:
        return False
    it = iter(clause)
    return all(ch in it for ch in value) and len(clause) <= 2 * len(value) + 4
