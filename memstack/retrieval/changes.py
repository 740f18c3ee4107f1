"""How people say that something changed, for a question about how things stand now.

"我现在住在哪个城市？" is answered by "我上个月从上海搬到深圳了": the question says 住在, the
answer 搬到, and neither the words nor a small embedder's vectors join them, while the round that
says "住在上海" matches both. A question about now (``search.asks_about_now``) that names a kind
of fact that changes (where one lives or works, a job, what a project uses, a date) also looks,
in the keyword search, for the words that say that kind of fact changed; the newest round on the
subject is then put first (``search.newest_on_subject``). Pure functions.
"""

from __future__ import annotations

import re

#: (what the question asks about, the words that say it changed)
TOPICS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"住|城市|搬|定居|家在|\b(?:live|lives|living|city|town|move|moved|home)\b", re.IGNORECASE),
        "搬到 搬家 搬去 搬回 迁居 定居 moved relocated",
    ),
    (
        re.compile(
            r"工作|上班|公司|单位|职业|职位|岗位|科室|部门|团队|老板|上司|\b(?:work|works|job|company|employer|role|position|team|boss)\b",
            re.IGNORECASE,
        ),
        "换工作 跳槽 入职 辞职 离职 调到 转岗 升职 new job joined quit promoted",
    ),
    (
        re.compile(r"用|技术|语言|框架|数据库|工具|\b(?:use|uses|using|stack|language|framework|database|tool)\b", re.IGNORECASE),
        "改用 换成 换用 迁移 替换 switched migrated replaced",
    ),
    (
        re.compile(r"时间|日期|几号|哪天|几点|什么时候|截止|\b(?:when|date|time|deadline|day)\b", re.IGNORECASE),
        "推迟 提前 改到 延期 改期 postponed rescheduled moved",
    ),
)


def change_words(query: str) -> str:
    """The words that say the kind of fact ``query`` asks about changed (empty when it names
    none of those kinds)."""
    return " ".join(words for pattern, words in TOPICS if pattern.search(query))
