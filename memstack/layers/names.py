"""How the model-backed layers name things: the user's own names, a name's entity key (a
leading determiner dropped, "星图项目" and "星图" one stem), aliases, the first person in a
question, and the names the user introduces themself with. Pure functions on text, shared by
the extractor (``extractor``, ``resolve``), the checks of its statements (``verify``) and the
read sides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..llm.grounding import normalize
from ..text import person_names
from ..types import Message, Record

#: relation names that say two names are one entity: kept as relations, traversed at no hop cost
ALIAS_RELATIONS = frozenset(
    normalize(r)
    for r in (
        "笔名",
        "别名",
        "又名",
        "又称",
        "外号",
        "昵称",
        "也叫",
        "化名",
        "英文名",
        "叫",
        "名叫",
        "叫做",
        "名字",
        "姓名",
        "名字是",
        "名字叫",
        "name",
        "called",
        "alias",
        "aka",
        "also known as",
        "pen name",
        "nickname",
        "known as",
        "a.k.a.",
        "is called",
        "is named",
        "name is",
        "named",
    )
)
#: words that, in a relation's evidence naming both ends, say the two names are one entity
ALIAS_WORDS = ("笔名", "别名", "又名", "又称", "外号", "昵称", "化名", "pen name", "also known as", "nickname", "alias", "a.k.a")
#: what a speaker calls themself: stored under one key so the profile has one entry
SELF_NAMES = frozenset(
    normalize(n) for n in ("用户", "我", "我的", "本人", "我自己", "用户本人", "俺", "俺的", "user", "the user", "i", "me", "my", "myself")
)
SELF_KEY = "user"
#: a question in the first person is about the user's own entity ("我的后端使用什么技术？")
_FIRST_PERSON = re.compile(r"我|俺|本人|\b(?:i|me|my|mine|myself|i'm|i've|i'd)\b")
#: how a user introduces themself: the name follows ("我叫小李", "my name is Li Lei")
_SELF_INTRO = re.compile(
    r"(?:[我俺]叫|[我俺]的名字(?:是|叫)|[我俺]名叫|本人叫|\bmy name is|\bcall me)\s*([^\s，,。.!！？?、；;：:（）()]+(?: [A-Z][\w-]*)?)",
    re.IGNORECASE,
)
#: determiners and quantifiers that are not part of a name ("一个知识中台", "the Atlas project")
_NAME_PREFIX = re.compile(
    r"^(?:一个|一款|一家|一位|一名|一套|一种|一项|这个|那个|这款|那款|这家|那家|我的|我们的|咱们的|the |a |an |my |our |this |that )",
    re.IGNORECASE,
)
#: generic type words after a name ("星图项目" is 星图 when 星图 is known, and the reverse)
_TYPE_SUFFIX = re.compile(
    r"(?:项目|系统|平台|公司|集团|应用|产品|工具|框架|服务|网站|小程序|团队|app|project|system|platform|company|service|tool|framework|app|team|inc\.?|ltd\.?)$",
    re.IGNORECASE,
)


def first_person(text: str) -> bool:
    """Whether the text speaks in the first person (我/我的/I/my/me): a question about the user."""
    return _FIRST_PERSON.search(normalize(text)) is not None


#: the assistant is not an entity of the user's memory
ASSISTANT_NAMES = frozenset(normalize(n) for n in ("助手", "assistant", "the assistant", "ai", "ai助手", "chatgpt"))


def is_alias(relation: str, evidence: str = "", source: str = "", target: str = "") -> bool:
    """An alias relation by its name ("笔名", "是…的笔名", "pen name of"), or by evidence that names
    both ends and an alias word."""
    label = normalize(relation)
    if label in ALIAS_RELATIONS or any(w in label for w in ALIAS_WORDS):
        return True
    ev = normalize(evidence)
    return bool(source and target and normalize(source) in ev and normalize(target) in ev and any(w in ev for w in ALIAS_WORDS))


def entity_key(name: str) -> str:
    """The key of the entity a name means: normalised, a leading determiner or quantifier removed
    ("一个知识中台" -> "知识中台"), and every name of the speaker ("用户", "我", "I") -> SELF_KEY."""
    key = normalize(name)
    if key in SELF_NAMES:
        return SELF_KEY
    bare = _NAME_PREFIX.sub("", key).strip()
    return bare if len(bare) >= 2 else key


def display_name(name: str) -> str:
    """A name as shown, without a leading determiner ("一个知识中台" -> "知识中台")."""
    text = name.strip()
    bare = _NAME_PREFIX.sub("", text).strip()
    return bare if len(bare) >= 2 else text


def stem(key: str) -> str:
    """A key without a generic type word at its end ("星图项目" -> "星图"); the key itself when what
    is left would be too short to name anything."""
    bare = _TYPE_SUFFIX.sub("", key).strip()
    return bare if len(bare) >= 2 and (not bare.isascii() or len(bare) >= 3) else key


def relation_label(relation: str, source: str, target: str) -> str:
    """The relation without the names of its ends, which small models repeat in it
    ("后端使用SpringBoot" between 知识中台 and SpringBoot -> "后端使用")."""
    label = relation.strip()
    for name in (target.strip(), source.strip()):
        if name and name in label and label.replace(name, "").strip(" ：:，,"):
            label = label.replace(name, "").strip(" ：:，,")
    return label


def self_introduced(messages: Sequence[Message], names: Sequence[str], *, subjects: Sequence[str] = ()) -> list[str]:
    """Names the user gives themself in their own turns ("我叫小李，是一名程序员", "my name is Li
    Lei"): the extracted name the introduction starts with, or a short name standing alone. "I'm
    Daniel." counts when the name stands alone in its sentence and the batch's statements have it
    as a subject (``subjects``): "I'm Canadian." names no one."""
    known = sorted({n.strip() for n in names if n.strip() and entity_key(n) != SELF_KEY}, key=len, reverse=True)
    own = {normalize(n) for n in subjects if n.strip() and entity_key(n) != SELF_KEY}
    out: list[str] = []
    for m in messages:
        if m.role != "user":
            continue
        for match in _SELF_INTRO.finditer(m.text):
            said = match.group(1).strip()
            name = next((n for n in known if normalize(said).startswith(normalize(n))), None)
            if name is None and match.group(0)[:1] in "我俺本" and _bare_name(said):
                name = said  # "我叫李四。": a short name standing alone
            if name and name not in out:
                out.append(name)
        for match in _I_AM_NAME.finditer(m.text):
            said = match.group(1).strip()
            if normalize(said) in own and said not in out:
                out.append(said)
        for said in _zh_i_am(m.text):  # "我是林思远，在协和医院当护士": the same, in Chinese
            if normalize(said) in own and said not in out:
                out.append(said)
    return out


def _zh_i_am(text: str) -> list[str]:
    """The person's name right after a sentence's "我是" that stands alone before a punctuation mark
    or the end ("我是林思远，在…", "我是王磊。"; not "我是李老师的学生", not "我是护士"), as jieba's
    tagger reads names (``text.person_names``)."""
    out = []
    for match in _ZH_I_AM.finditer(text):
        at = match.end()
        for start, end, name in person_names(text[at : at + 6]):
            rest = text[at + end : at + end + 1]
            if start == 0 and (not rest or rest in "，,。.！!；;、 "):
                out.append(name)
    return out


_ZH_I_AM = re.compile(r"(?:^|(?<=[，,。.！!？?；;\s]))[我俺]是")
#: "I'm Daniel." / "I am Sarah Chen," at a sentence's start: a name that stands alone after it
_I_AM_NAME = re.compile(r"(?:^|(?<=[.!?])\s+)(?:I'm|I am|I’m)\s+([A-Z][a-z]+(?: [A-Z][a-z]+)?)\s*(?=[.,!;]|$)")


def _bare_name(text: str) -> bool:
    """A short Chinese name standing alone after "我叫" (not "什么", not "了外卖")."""
    return (
        2 <= len(text) <= 4
        and all("\u3400" <= c <= "\u9fff" for c in text)
        and text[0] not in "了过着的是个"
        and not re.search("什么|谁|啥|哪|吗|呢", text)
    )


def names_of(record: Record) -> list[str]:
    """An entity record's name and aliases, those that are not empty."""
    return [n for n in [record.value.get("name", ""), *record.value.get("aliases", [])] if n]
