"""Every code block of README.md and of every docs page runs as written (issues 15 and 28).

A block is a fenced block; the HTML comment on the line before it, if any, says how it runs:

    (none)                   runs here; the local model is a ScriptedModel with no answers, so a
                             block that calls a model fails (its answers are not the block's point)
    <!-- scripted: NAME -->  runs here with memstack.testing.ScriptedModel answering, with SCRIPTS[NAME],
                             in place of the local model; every scripted answer must be used
    <!-- local model -->     runs on the real local model (the ``local_model`` marker, 1 thread)
    <!-- article -->         a quote of an article's code (ChatOllama, Chroma, Milvus...): not run
    <!-- not run: REASON --> cannot run in CI (a server it names, a sketch): not run, says why
    <!-- tour -->            README only: scripts/tour.py runs it in a fresh clone and virtualenv

Python blocks that do not run are still compiled. Python blocks run in this process with fresh
globals (``__name__ == "__main__"``), a fresh temporary directory as the working directory and
``MEMSTACK_HOME``, and sockets to loopback only. The local model is replaced through
``memstack.llm.shared_local_model``, what ``get_chat_model("local")``, ``MemstackChatModel(model=
"local")`` and the layers' default ``model`` resolve to. A line ``print(x)  # LITERAL`` (a Python
literal: ``35``, ``['知识中台', 'SpringBoot']``) promises its output, and the test holds it to it.
Bash blocks run in the docs page only (README's runnable ones are the tour's), with this
virtualenv's ``bin`` first on PATH.

``MEMSTACK_DOCS_MODEL=local`` runs the scripted blocks on the real local model instead, as a
reader would (by hand: minutes on two cores; their promised prints must still hold).
"""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytest_socket import SocketConnectBlockedError, enable_socket, socket_allow_hosts

import memstack.llm
from memstack.testing import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent
#: the articles' page first (the test of its own below reads PAGES[0]), the README, then every other
#: page of the docs site: a new page's blocks run without being listed here
PAGES = (
    "docs/from-the-articles.md",
    "README.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name != "from-the-articles.md"),
)
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
MARK = re.compile(r"<!--\s*(scripted|local model|article|not run|tour)\s*(?::\s*(.*?))?\s*-->\s*$")
PYTHON = ("python", "py", "python3")
SHELL = ("bash", "sh", "shell", "console")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the block's first code line, 1-based
    lang: str
    code: str
    mark: str | None  # scripted, local model, article, not run, tour
    arg: str  # the script's name, or why it is not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.mark not in ("article", "not run", "tour") and (
            self.lang in PYTHON or (self.lang in SHELL and self.page != "README.md")
        )


def blocks_of(page: str) -> list[Block]:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        found.append(
            Block(
                page,
                line + 1,
                match.group(1).lower(),
                match.group(2),
                mark.group(1) if mark else None,
                (mark.group(2) or "") if mark else "",
            )
        )
    return found


BLOCKS = [b for page in PAGES for b in blocks_of(page)]


# ---- the scripted models' answers, by the name a block's mark gives ---------------------------


def statements(*rows: tuple[str, str, str, str], state: list[tuple[str, str]] | None = None) -> str:
    """The memory extractor's answer: (subject, type, predicate, object) statements, state items."""
    body: dict[str, Any] = {"memories": [{"subject": s, "subject_type": t, "predicate": p, "object": o} for s, t, p, o in rows]}
    if state is not None:
        body["state"] = [{"key": k, "value": v} for k, v in state]
    return json.dumps(body, ensure_ascii=False)


def action(name: str, **arguments: Any) -> str:
    """A JSON action of memstack.tool_chat (a tool call, or ``answer``)."""
    if name == "answer":
        return json.dumps({"action": "answer", "answer": arguments["answer"]}, ensure_ascii=False)
    return json.dumps({"action": name, "arguments": arguments}, ensure_ascii=False)


def chat(answer: str) -> Callable[[list[dict], Any], str]:
    """A chat answer for calls without a schema; a call with one fails the block."""

    def reply(messages: list[dict], schema: Any) -> str:
        assert schema is None, "this block's scripted model answers chat calls only"
        return answer

    return reply


PROJECT = [
    ("用户", "人物", "正在开发", "知识中台"),
    ("知识中台", "项目", "后端使用", "SpringBoot"),
    ("知识中台", "项目", "文档检索使用", "Elasticsearch"),
]

#: name -> (outputs, default): what the block's model answers, in order
SCRIPTS: dict[str, tuple[list[Any], Any]] = {
    "summary-memory": ([statements(*PROJECT)], None),
    "state-memory": (
        [statements(state=[("目的地", "杭州"), ("出发日期", "12月20号"), ("人数", "两个人")]), statements(state=[("目的地", "苏州")])],
        None,
    ),
    "tool-memory": (
        [action("save_memory", key="后端框架", value="SpringBoot"), action("answer", answer="好的，已记住：后端框架是SpringBoot。")],
        None,
    ),
    "history": ([], chat("我今天吃了火锅。")),
    "runnable-history": ([], chat("好的。")),
    "summarization": (
        [statements(("用户", "人物", "叫", "李四"), ("用户", "人物", "职业是", "软件工程师"), ("用户", "人物", "喜欢", "打网球"))],
        chat("好的。"),
    ),
    "milvus-loop": ([], chat("好的，记住了。")),
    "state-graph": ([], chat("好的，记住了。")),
    "window-chat": ([], chat("您的订单已发货。")),
    "entity-layer": (
        [
            json.dumps(
                {
                    "entities": [
                        {
                            "name": "知识中台",
                            "entity_type": "项目",
                            "description": "正在开发的知识中台",
                            "attributes": {"开发状态": "开发中"},
                            "confidence": 0.95,
                        },
                        {
                            "name": "SpringBoot",
                            "entity_type": "技术",
                            "description": "后端框架",
                            "attributes": {"应用场景": "后端"},
                            "confidence": 0.95,
                        },
                        {
                            "name": "Elasticsearch",
                            "entity_type": "技术",
                            "description": "搜索引擎",
                            "attributes": {"应用场景": "文档检索"},
                            "confidence": 0.95,
                        },
                        {
                            "name": "Redis",
                            "entity_type": "技术",
                            "description": "内存数据库",
                            "attributes": {"应用场景": "缓存"},
                            "confidence": 0.95,
                        },
                        {"name": "Kafka", "entity_type": "技术", "description": "消息队列", "attributes": {}, "confidence": 0.9},
                    ]
                },
                ensure_ascii=False,
            )
        ],
        None,
    ),
    "graph-chain": (
        [
            json.dumps(
                {
                    "entities": [
                        {"name": "小李", "entity_type": "人物", "description": "程序员"},
                        {"name": "知识中台", "entity_type": "项目", "description": "小李开发的项目"},
                    ],
                    "relations": [
                        {"source": "小李", "target": "程序员", "relation": "职业", "evidence": "小李是一名程序员。", "confidence": 1.0},
                        {"source": "莫尔索", "target": "小李", "relation": "笔名", "evidence": "莫尔索是小李的笔名。", "confidence": 1.0},
                        {
                            "source": "小李",
                            "target": "知识中台",
                            "relation": "开发",
                            "evidence": "小李正在开发知识中台。",
                            "confidence": 1.0,
                        },
                        {
                            "source": "知识中台",
                            "target": "SpringBoot",
                            "relation": "使用",
                            "evidence": "知识中台后端使用SpringBoot。",
                            "confidence": 1.0,
                        },
                    ],
                },
                ensure_ascii=False,
            )
        ],
        None,
    ),
    "graph-layer": (
        [
            statements(
                ("小李", "人物", "是", "程序员"),
                ("莫尔索", "人物", "是笔名", "小李"),
                ("小李", "人物", "开发", "知识中台"),
                ("知识中台", "项目", "后端使用", "SpringBoot"),
            )
        ],
        None,
    ),
    "summary-update": (
        [statements(*PROJECT, ("知识中台", "项目", "缓存使用", "Redis")), statements(("知识中台", "项目", "缓存使用", "Memcached"))],
        None,
    ),
    "summary-buffer": ([statements(*PROJECT)], chat("您的缓存用的是Redis。")),
    "chroma-chat": ([], chat("根据你的描述，你平时喜欢跑步。")),
    "model-layers": (
        [
            statements(
                ("小李", "人物", "是", "程序员"),
                ("莫尔索", "人物", "是笔名", "小李"),
                ("小李", "人物", "开发", "知识中台"),
                ("知识中台", "项目", "后端使用", "SpringBoot"),
            )
        ],
        None,
    ),
}

#: name -> what the page says the block prints with its script (checked when it runs scripted)
SHOWS: dict[str, tuple[str, ...]] = {
    "summary-update": ("知识中台缓存使用Redis（过去的情况：2026-11-09起改为 知识中台缓存使用Memcached）",),
    "graph-layer": ("莫尔索 —是笔名→ 小李", "小李 —开发→ 知识中台", "知识中台 —后端使用→ SpringBoot"),
    "state-memory": ("supersede 目的地 {'value': '杭州'} {'value': '苏州'}",),
}


# ---- running a block ----------------------------------------------------------------------------


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh working directory and MEMSTACK_HOME; sockets to loopback only."""

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMSTACK_HOME", str(tmp_path / "home"))
    for name in ("MEMSTACK_DB", "MEMSTACK_VECTORS"):
        monkeypatch.delenv(name, raising=False)
    socket_allow_hosts(["127.0.0.1", "::1", "localhost"], allow_unix_socket=True)
    try:
        yield tmp_path
    finally:
        enable_socket()


def promises(code: str) -> dict[int, Any]:
    """Line -> the literal a ``print(...)  # LITERAL`` line promises to print."""
    prints = {
        n.lineno for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
    }
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and tok.start[0] in prints:
            try:
                found[tok.start[0]] = ast.literal_eval(tok.string[1:].strip())
            except (ValueError, SyntaxError):
                continue
    return found


def printed_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def run_python(block: Block) -> dict[int, list[str]]:
    """Exec the block; what each of its lines printed."""
    filename = block.where
    out: dict[int, list[str]] = {}
    real_print = print

    def recording_print(*args: Any, sep: str = " ", end: str = "\n", file: Any = None, flush: bool = False) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != filename:
            frame = frame.f_back
        if file is None and frame is not None:
            out.setdefault(frame.f_lineno, []).append(sep.join(str(a) for a in args))
        real_print(*args, sep=sep, end=end, file=file, flush=flush)

    linecache.cache[filename] = (len(block.code), None, block.code.splitlines(True), filename)  # tracebacks show the block's lines
    code = compile(block.code, filename, "exec", dont_inherit=True)  # not this file's __future__ annotations
    exec(code, {"__name__": "__main__", "print": recording_print})
    return out


def check_promises(block: Block, printed: dict[int, list[str]]) -> None:
    for line, expected in promises(block.code).items():
        got = printed.get(line, [])
        assert len(got) == 1, f"{block.page}:{block.line + line - 1} promises one print of {expected!r}, printed {got!r}"
        assert printed_value(got[0]) == expected, f"{block.page}:{block.line + line - 1} promises {expected!r}, printed {got[0]!r}"


def stand_in(block: Block) -> ScriptedModel | None:
    """The model answering for "local" in this block (None: the real one)."""
    if block.mark == "local model":
        return None
    if block.mark == "scripted":
        assert block.arg in SCRIPTS, f"{block.where}: no script named {block.arg!r} in SCRIPTS"
        if os.environ.get("MEMSTACK_DOCS_MODEL") == "local":
            return None
        outputs, default = SCRIPTS[block.arg]
        return ScriptedModel(outputs, default=default, name=f"scripted:{block.arg}")
    return ScriptedModel(name="no-model")


def run_block(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    if block.lang in SHELL:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return
    model = stand_in(block)
    if model is not None:
        monkeypatch.setattr(memstack.llm, "shared_local_model", lambda: model)
    printed = run_python(block)
    check_promises(block, printed)
    shown = "\n".join(text for lines in printed.values() for text in lines)
    for expected in SHOWS.get(block.arg, ()) if block.mark == "scripted" and model is not None else ():
        assert expected in shown, f"{block.where} should print {expected!r} (the page says so)"
    if model is not None and block.mark != "scripted":
        assert model.calls == [], f"{block.where} called a model; mark it <!-- scripted: NAME --> or <!-- local model -->"
    if model is not None and block.mark == "scripted":
        assert model.remaining == 0, (
            f"{block.where} left {model.remaining} of its scripted answers unused: the script no longer fits the block"
        )


def block_id(block: Block) -> str:
    return f"{block.where}[{block.mark or 'runs'}]"


MAIN = [b for b in BLOCKS if b.runs and b.mark != "local model"]
LOCAL = [b for b in BLOCKS if b.runs and b.mark == "local model"]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # B1 says so on the page
@pytest.mark.parametrize("block", MAIN, ids=block_id)
def test_the_block_runs_as_written(block: Block, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_block(block, monkeypatch)


@pytest.mark.local_model
@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", LOCAL, ids=block_id)
def test_the_block_runs_on_the_local_model(block: Block, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xllamacpp", reason="the local model needs: pip install 'memstack[local]'")
    run_block(block, monkeypatch)


# ---- the marks themselves -------------------------------------------------------------------------


def test_every_page_has_blocks_and_the_docs_page_runs_most_of_its_own() -> None:
    docs = [b for b in BLOCKS if b.page == PAGES[0]]
    ours = [b for b in docs if b.lang in PYTHON and b.mark not in ("article",)]
    assert len(docs) >= 20 and sum(b.runs for b in ours) >= len(ours) - 2, [b.where for b in ours if not b.runs]
    assert [b for b in BLOCKS if b.page == "README.md" and b.runs], "README.md has no block that runs"


def test_blocks_that_do_not_run_say_why_and_compile() -> None:
    for block in BLOCKS:
        if block.mark == "not run":
            assert block.arg.strip(), f"{block.where}: <!-- not run: REASON --> needs its reason"
        if block.lang in PYTHON and block.mark in ("not run", "tour"):
            compile(block.code, block.where, "exec", dont_inherit=True)  # a sketch is still Python (a quote is an excerpt)


def test_every_script_is_used_by_exactly_one_block() -> None:
    used = [b.arg for b in BLOCKS if b.mark == "scripted"]
    assert set(SHOWS) <= set(SCRIPTS), sorted(set(SHOWS) - set(SCRIPTS))
    assert sorted(used) == sorted(SCRIPTS), {
        "unused": sorted(set(SCRIPTS) - set(used)),
        "unknown or repeated": sorted(n for n in used if used.count(n) > 1 or n not in SCRIPTS),
    }


def test_tour_blocks_are_only_in_the_readme() -> None:
    assert all(b.page == "README.md" for b in BLOCKS if b.mark == "tour")


def test_a_broken_block_and_a_broken_promise_fail(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test can fail: a block that raises, a print that breaks its promise, a model called
    unmarked, a shell block that exits non-zero, a script the block no longer uses up."""
    broken = Block("x.md", 1, "python", "raise RuntimeError('boom')\n", None, "")
    with pytest.raises(RuntimeError, match="boom"):
        run_block(broken, monkeypatch)
    liar = Block("x.md", 1, "python", "print(1 + 1)  # 3\n", None, "")
    with pytest.raises(AssertionError, match="promises 3"):
        run_block(liar, monkeypatch)
    calls_model = Block(
        "x.md",
        1,
        "python",
        "from memstack.llm import get_chat_model\nget_chat_model('local').complete([{'role': 'user', 'content': 'hi'}])\n",
        None,
        "",
    )
    with pytest.raises(AssertionError, match="no output left"):
        run_block(calls_model, monkeypatch)
    run_block(Block("x.md", 1, "bash", 'test -n "$MEMSTACK_HOME" && memstack --version\n', None, ""), monkeypatch)
    with pytest.raises(AssertionError, match="exited 3"):
        run_block(Block("x.md", 1, "bash", "exit 3\n", None, ""), monkeypatch)
    offline = Block("x.md", 1, "python", "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)\n", None, "")
    with pytest.warns(UserWarning, match="192.0.2.1"), pytest.raises(SocketConnectBlockedError):  # no network beyond loopback
        run_block(offline, monkeypatch)
    leftover = Block("x.md", 1, "python", "pass\n", "scripted", "history")
    monkeypatch.setitem(SCRIPTS, "history", (["unused"], None))
    with pytest.raises(AssertionError, match="unused"):
        run_block(leftover, monkeypatch)
