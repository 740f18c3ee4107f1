"""Plans that came true: "下个月从岳麓区搬到雨花区" (a plan), then months later "搬好啦！".

A plan is stored as a plan (``计划=搬到雨花区``) and shown as one, which is right when it is said.
Once the user says it happened, a plan still shown as pending is a stale memory: the model reads
that the move is yet to come. The model seldom writes a statement for "搬好啦" (it names nothing),
so the words decide, as they do for a cessation (``verify.cessations``).

Decision: a completion is a user clause that says, in the past and not as a question, plan or
supposition, that one of a few kinds of change is done, each with the words a plan of that kind
must hold to be the one it completes:

- a move: "搬完了", "搬好啦", "已经搬过去了", "we moved", "we're all moved in" (the plan says 搬/move);
- a return: "回沈阳了", "I'm back in Leeds" (the plan says 回/back/return, and the place when named);
  one that names no place ("我们回来啦", "we got back from…", "旅游回来了") also completes a trip
  (the plan says 玩/旅游/旅行/度假/trip/vacation/visit);
- a transfer: "调过来了", "已经调过去了" (the plan says 调);
- a start: "入职了", "上岗了", "started at", "first week at" (the plan says 入职/上班/offer/join/start);
- a new post: "新学校上了两个礼拜课了", "my new job is fine" (the plan says 调/入职/跳槽/join/start/
  transfer), not while looking for one ("在找新工作");
- an opening: "开业一个多月了", "开张了", "we opened" (the plan says 开…店/馆/业 or open/launch).

A plan of the same owner, said before the completion, whose words hold its kind's words, ends
from the completion, marked done (``DONE``): the read side shows it as done, not as pending, and
``bench facts`` reads its content as current. A completion that names none of these ("终于弄好了")
ends nothing: a plan kept pending costs a stale plan, a wrong completion a lost one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..llm.grounding import normalize
from ..types import Message
from .verify import _FUTURE, _PLAN, owner_before, said_clauses

#: the key a done plan's past value carries (with the day it came true in "until")
DONE = "done"

#: a name or predicate that says its value is a plan
PLAN_NAME = re.compile(
    r"打算|计划|准备|考虑|想(?!念|法|象|起)|希望|\bplan|\bconsider|\bintend|\bhop(?:e|es|ing) to\b|\bwant", re.IGNORECASE
)

#: (kind, what says it is done, what a plan of the kind holds); a "回" completion's place is in group "place"
_KINDS: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = (
    (
        "move",
        re.compile(
            r"搬(?:完|好|过去|过来|进去|进来|进|家)+(?:了|啦|喽|咯)|搬了(?:家|过去|过来)|(?:已经|终于|总算)搬|"
            r"\b(?:we|i)(?:'ve| have)?\s+(?:finally\s+|just\s+|officially\s+)?(?:moved|relocated)\b(?!\s+(?:the|a|an|it|our|my|his|her|their|them|that|this|some|everything)\b)|\ball moved in\b|\bmoved in\b|\bmade the move\b",
            re.IGNORECASE,
        ),
        re.compile(r"搬|\bmov(?:e|ing)\b|\brelocat", re.IGNORECASE),
    ),
    (
        "return",
        re.compile(
            r"(?:^|我们?|俺|咱们?|已经|终于|总算|又|也)(?:回(?:到|来|去)?(?P<place>[\u4e00-\u9fff]{2,4}?)|回来|回去)(?:了|啦)(?![\u4e00-\u9fff]{0,2}吗)|"
            r"(?:玩|旅游|旅行|度假|自驾|蜜月)回来(?:了|啦)?(?![\u4e00-\u9fff]{0,2}吗)|"
            r"\b(?:i'm|i am|we're|we are)\s+(?:finally\s+|just\s+)?back\b(?:\s+(?:in|home in)\s+(?P<place_en>[A-Z][\w-]+))?|"
            r"\b(?:i|we)\s+(?:just\s+)?(?:got|came|flew)\s+back\s+(?:from|home)\b",
            re.IGNORECASE,
        ),
        re.compile(r"回|\bback\b|\breturn", re.IGNORECASE),
    ),
    ("transfer", re.compile(r"调(?:过去|过来|到了|好了)|(?:已经|终于)调"), re.compile(r"调(?:到|去|回|动|岗|过)")),
    (
        "start",
        re.compile(
            r"入职了|上岗了|报到了|(?:已经|终于)(?:入职|上岗|报到)|\b(?:i|we)\s+(?:finally\s+|just\s+|officially\s+)?started\s+(?:(?:at|with)\s+(?!\d|noon|dawn|night|home|the gym|a |the beginning)|the new\b|my new\b|work\b)|\bfirst (?:day|week|month) at\b",
            re.IGNORECASE,
        ),
        re.compile(r"入职|上班|跳槽|offer|\bjoin|\bstart|\bnew job\b", re.IGNORECASE),
    ),
    (
        # "新学校上了两个礼拜课了", "my new job is fine": the new place is where one is now
        "new post",
        re.compile(
            r"新(?:学校|公司|单位|岗位|部门|东家|办公室|工作)(?!.{0,6}(?:找|面试|投|看))|\b(?:my|our) new (?:job|school|office|company|employer|team|role)\b",
            re.IGNORECASE,
        ),
        re.compile(r"调(?:到|去|回|动|岗|过)|入职|上班|跳槽|offer|\bjoin|\bstart|\bnew job\b|\btransfer", re.IGNORECASE),
    ),
    (
        "open",
        re.compile(
            r"开业[^，。！？吗]{0,8}了|开张[^，。！？吗]{0,8}了|(?:已经|终于)开(?:业|张)|\b(?:we|i)\s+(?:finally\s+|just\s+|officially\s+)?(?:opened|launched)\b",
            re.IGNORECASE,
        ),
        re.compile(r"开[^，。！？]{0,4}(?:店|馆|铺|业|张|工作室|公司)|\bopen|\blaunch", re.IGNORECASE),
    ),
)
#: the words a plan of each kind holds
_PLAN_WORDS = {kind: plan for kind, _said, plan in _KINDS}
#: the words of a trip: coming back from one (a return that names no place) says it happened
_TRIP = re.compile(r"玩|旅游|旅行|度假|出游|自驾游|蜜月|\b(?:trip|vacation|holiday|travel\w*|visit\w*)\b", re.IGNORECASE)
#: a clause about looking for the new place, not being there ("在找新工作", "looking for a new job")
_SEEKING = re.compile(r"找|面试|投简历|应聘|看房|\b(?:looking|search|hunting|apply|applying|interview)", re.IGNORECASE)
#: a negation right before a completion ("还没搬完", "haven't moved")
_NOT_YET = re.compile(r"(?:没|不|未|别)[^，。！？]{0,3}$|(?:n't|\bnot|\bnever|\byet to)\s*\w*\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Completion:
    """A change the user's words say is done ("搬好啦"), with the words that say it."""

    kind: str
    #: the place a return names ("回沈阳了": 沈阳), else ""
    place: str
    quote: str
    message: Message
    #: whose plan it completes: "" for the user's, else the words that name its owner
    whose: str = ""


def completions(messages: Sequence[Message]) -> list[Completion]:
    """The completions the user's turns say (see the module's decision)."""
    out: list[Completion] = []
    for m, sentence, text, clause, start in said_clauses(messages):
        if _PLAN.search(clause) or _FUTURE.search(clause):
            continue
        for kind, said, _plan in _KINDS:
            hit = said.search(clause)
            if hit and not _NOT_YET.search(clause[: hit.start()]) and not (kind == "new post" and _SEEKING.search(clause)):
                place = next((g for g in (hit.groupdict().get("place"), hit.groupdict().get("place_en")) if g), "")
                out.append(Completion(kind, place, sentence.strip()[:200], m, owner_before(text[: start + hit.start()])))
                break
    return out


def completes(c: Completion, name: str, value: str, evidence: str) -> bool:
    """Whether ``c`` completes the stored plan ``name=value`` (said in ``evidence``): the name says
    a plan, and its words hold the kind's words (and a return's place, where one is named)."""
    if not PLAN_NAME.search(normalize(name)):
        return False
    words = normalize(f"{name} {value} {evidence}")
    plan = _PLAN_WORDS[c.kind]
    trip = c.kind == "return" and not c.place and _TRIP.search(words)  # "我们回来啦!" after "打算去日本玩"
    if not (plan.search(words) or trip) or normalize(evidence) == normalize(c.quote):
        return False
    return not c.place or normalize(c.place) in words
