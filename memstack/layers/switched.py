"""A change the user says without its new value ends the old one: after "我又换工作了" or "we've
moved", the job or the home said before is no longer current, whether or not the model wrote a
statement for the new one.

The small model often writes nothing for a second change in a long turn ("我又換工作了 … 八月轉到
一家金融科技公司當資深UX研究員 … 薪水六萬": no statement, so the old title and the old salary stayed
current, the worst error ``bench facts`` counts). A cessation (``verify.cessations``) names what
it ends; these words name only a kind of value, so they end every current value of that kind
that was said before them:

- a new job ("换工作了", "跳槽了", "辞职了", "转行了", "changed jobs", "got a new job", "quit my job"):
  the user's employer and occupation, and what goes with a post (salary, team, department, the
  one they report to);
- a new home ("搬家了", "搬了家", "we moved", "moved house", "we shifted"): where the user lives.

Decisions. Only the user's own words, in a clause that is not a question, a supposition, a plan
("打算换工作", "thinking about changing jobs") or a negation ("没换工作"), and only with the user as
the one who changed ("我老公换工作了" ends nothing of the user's). A value said in the same round or
later, or said again there ("换工作了，还是在腾讯"), stays: the change's own round says what is
current. The old value ends (past, from the round that said the change); nothing takes its place
unless the words say what.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..llm.grounding import normalize, overlap
from ..types import Message
from .supersede import kind
from .verify import owner_before, said_clauses

_JOB_ZH = r"换了?(?:个|份|一份|一个)?(?:新)?工作|跳槽了|跳了槽|辞职了|离职了|辞了职|离了职|转行了|工作换了"
_JOB_EN = (
    r"\b(?:changed|switched|changing) (?:jobs|companies|employers)\b|\b(?:got|started|found|took) a new job\b|\bnew job\b"
    r"|\b(?:quit|left) my job\b|\bjob change\b"
)
_HOME_ZH = r"搬家了|搬了家|搬新家了|搬完家|搬过来了|搬进了?新家|又搬了"
_HOME_EN = (
    r"\bmoved (?:house|home|flats?|apartments?)\b|\b(?:we|i)(?:'ve| have)? (?:just |finally |already )?(?:moved|shifted)\b"
    r"(?!\s+(?:on|in with|the|my|our|it|them|up|forward|over|away from|out of the|back to work))"
    r"|\bshifted (?:house|home|flats?)\b"
)
#: a clause that plans, wishes or denies the change: it did not happen
_NOT_DONE = re.compile(
    r"打算|计划|准备|考虑|想|希望|要不要|该不该|会不会|没有?|不|别|还没|在找|找|"
    r"\b(?:if|plan|planning|thinking|considering|might|maybe|want|wanna|going to|gonna|hope|should|need|looking|look|search|searching|"
    r"find|apply|applying|interview|interviewing|hunting|not|never|haven't|didn't|won't|don't)\b",
    re.IGNORECASE,
)

#: (name of the kind, the cue, what the kind's values are named)
_KINDS = (
    (
        "job",
        re.compile(f"{_JOB_ZH}|{_JOB_EN}", re.IGNORECASE),
        re.compile(
            r"^(?:工作|做|当|担任|works?|working|works? in|works? as)$|薪|工资|收入|月薪|年薪|部门|所在组|团队|上司|领导|老板|汇报给|"
            r"\b(?:salary|pay|income|package|ctc|team|department|manager|boss|reports? to)\b",
            re.IGNORECASE,
        ),
        frozenset({"职业", "工作单位"}),
    ),
    (
        "home",
        re.compile(f"{_HOME_ZH}|{_HOME_EN}", re.IGNORECASE),
        re.compile(r"^(?:stays?|staying|lives?|living|居住地|住址|家住)$", re.IGNORECASE),
        frozenset({"住在"}),
    ),
)


@dataclass(frozen=True)
class Switch:
    """A change of a kind of value the user said ("我又换工作了": job), with its words and message;
    ``whose`` is "" (the user's), as a cessation's is."""

    kind: str
    quote: str
    message: Message
    #: the user's turns from the change's round on: what they say is current
    from_then: tuple[str, ...] = ()
    whose: str = ""

    def ends(self, name: str, value: str, evidence: str) -> bool:
        """Whether the value ``name``=``value`` (said in ``evidence``) is one this change ends: of its
        kind, said before the change's round, and not said again in that round or after it."""
        if not _of_kind(self.kind, name):
            return False
        said = normalize(evidence)[:40]
        if not said or any(said in normalize(t) for t in self.from_then):
            return False  # said in the change's own round or later: it is what the round says
        return not any(overlap(value, t) >= 0.5 for t in self.from_then)


def _of_kind(which: str, name: str) -> bool:
    for label, _cue, names, kinds in _KINDS:
        if label == which:
            n = normalize(name).strip()
            return kind(n) in kinds or bool(names.search(n))
    return False


def switches(messages: Sequence[Message]) -> list[Switch]:
    """The changes of job or home the user's turns say of the user, in the order said (at most one
    of each kind per message)."""
    out: list[Switch] = []
    for m, sentence, text, clause, start in said_clauses(messages):
        for label, cue, _names, _kinds in _KINDS:
            hit = cue.search(clause)
            if not hit or any(s.kind == label and s.message.id == m.id for s in out):
                continue
            before = clause[: hit.start()]
            if _NOT_DONE.search(before) or owner_before(text[: start + hit.start()]):
                continue
            from_then = tuple(x.text for x in messages if x.role == "user" and x.timestamp >= m.timestamp)
            out.append(Switch(label, sentence.strip()[:200], m, from_then))
    return out
