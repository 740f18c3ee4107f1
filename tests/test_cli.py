"""The memstack command, run as a real process against a real SQLite home."""

import json
import os
import subprocess
import sys

import pytest
from openai_stub import CannedOpenAI


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def run(home, *args, input=None, check=True):
    env = {**os.environ, "MEMSTACK_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "memstack", *args], input=input, capture_output=True, env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr.decode()}")
    return proc


def out_json(proc):
    return json.loads(proc.stdout.decode())


LISI = [
    ("user", "我叫李四"),
    ("assistant", "你好李四！"),
    ("user", "我正在开发一个知识中台"),
    ("assistant", "好的"),
    ("user", "后端使用SpringBoot"),
    ("assistant", "明白"),
]


def seed(home, thread="s1"):
    for i, (role, text) in enumerate(LISI):
        run(home, "add", "--user", "user_001", "--thread", thread, "--role", role, "--at", f"2026-11-02T20:0{i}:00+08:00", text)


def test_add_context_threads_history(home):
    seed(home)
    ctx = out_json(
        run(home, "context", "--user", "user_001", "--thread", "s1", "--strategy", "window", "--k", "2", "--query", "我叫什么？", "--json")
    )
    assert set(ctx) >= {"messages", "tokens", "dropped"}
    assert [m["content"] for m in ctx["messages"]] == ["我正在开发一个知识中台", "好的", "后端使用SpringBoot", "明白", "我叫什么？"]
    assert ctx["messages"][0] == {"role": "user", "content": "我正在开发一个知识中台"}
    assert ctx["dropped"][0]["layer"] == "window" and ctx["tokens"] > 0
    trimmed = out_json(
        run(
            home,
            "context",
            "--user",
            "user_001",
            "--thread",
            "s1",
            "--strategy",
            "trim",
            "--max-tokens",
            "30",
            "--tokenizer",
            "cl100k_base",
            "--json",
        )
    )
    assert trimmed["tokens"] <= 30 and trimmed["counter"] == "cl100k_base"
    contents = [m["content"] for m in trimmed["messages"]]
    assert "你好李四！" not in contents or "我叫李四" in contents
    early = out_json(run(home, "context", "--user", "user_001", "--thread", "s1", "--at", "2026-11-02T20:01:30+08:00", "--json"))
    assert [m["content"] for m in early["messages"]] == ["我叫李四", "你好李四！"]
    threads = out_json(run(home, "threads", "--user", "user_001", "--json"))
    assert [(t["thread_id"], t["messages"]) for t in threads] == [("s1", 6)]
    hist = out_json(run(home, "history", "--user", "user_001", "--thread", "s1", "--json"))
    assert hist[0]["timestamp"] == "2026-11-02T20:00:00+08:00" and len(hist) == 6
    text = run(home, "context", "--user", "user_001", "--thread", "s1", "--strategy", "window", "--k", "1").stdout.decode()
    assert "[user] 后端使用SpringBoot" in text and "dropped 4 messages" in text and "outside the last 1 turn\n" in text


def test_stdin_text_and_bad_input_exit_2_with_one_line(home):
    run(home, "add", "--user", "u", "--thread", "t", "--role", "user", "-", input="从标准输入来的消息".encode())
    assert out_json(run(home, "history", "--user", "u", "--thread", "t", "--json"))[0]["content"] == "从标准输入来的消息"
    cases = [
        (["add", "--user", "u", "--thread", "t", "--role", "user", "-"], b"\xff\xfe bad bytes"),
        (["add", "--user", "u", "--thread", "t", "--role", "user", "   "], None),
        (["add", "--user", "u", "--thread", "t", "--role", "robot", "hi"], None),
        (["add", "--thread", "t", "--role", "user", "hi"], None),
        (["add", "--user", "", "--thread", "t", "--role", "user", "hi"], None),
        (["add", "--user", "u", "--thread", "t", "--role", "user", "-"], b"x" * 1_000_001),
        (["add", "--user", "u", "--thread", "t", "--role", "user", "--at", "not a date", "hi"], None),
        (["context", "--user", "u", "--thread", "t", "--strategy", "nope"], None),
        (["context", "--user", "u", "--thread", "t", "--tokenizer", "nope"], None),
        (["import", "/nonexistent/file.jsonl"], None),
    ]
    for args, stdin in cases:
        proc = run(home, *args, input=stdin, check=False)
        err = proc.stderr.decode().strip()
        assert proc.returncode == 2, (args, err)
        assert len(err.splitlines()) == 1 and err.startswith("memstack: error:"), (args, err)
    assert len(out_json(run(home, "history", "--user", "u", "--thread", "t", "--json"))) == 1


def test_forget_asks_unless_yes(home):
    seed(home, "s1")
    seed(home, "s2")
    proc = run(home, "forget", "--user", "user_001", "--thread", "s1", check=False)
    assert proc.returncode == 2 and "--yes" in proc.stderr.decode()
    assert out_json(run(home, "forget", "--user", "user_001", "--thread", "s1", "--yes", "--json")) == {"deleted": 6}
    assert [t["thread_id"] for t in out_json(run(home, "threads", "--user", "user_001", "--json"))] == ["s2"]
    run(home, "forget", "--user", "user_001", "--yes")
    gone = run(home, "threads", "--user", "user_001", "--json", check=False)  # a forgotten user is unknown, as over REST
    assert gone.returncode == 1 and "no such user" in gone.stderr.decode()


def test_export_import_round_trip(home, tmp_path):
    seed(home, "s1")
    seed(home, "s2")
    dump = run(home, "export", "--user", "user_001").stdout
    assert len(dump.decode().splitlines()) == 12 and "李四" in dump.decode()
    other = tmp_path / "other"
    assert out_json(run(other, "import", "-", "--json", input=dump)) == {"imported": 12, "records": 12, "already_stored": 0}
    for t in ("s1", "s2"):
        a = out_json(run(home, "history", "--user", "user_001", "--thread", t, "--json"))
        b = out_json(run(other, "history", "--user", "user_001", "--thread", t, "--json"))
        assert a == b
    bad = run(other, "import", "-", input=b'{"user_id": "u", "thread_id": "t", "role": "user", "content": "ok"}\nnot json\n', check=False)
    assert bad.returncode == 2 and ":2:" in bad.stderr.decode()


def test_tenants_are_separate(home):
    run(home, "add", "--tenant", "acme", "--user", "user_001", "--thread", "t", "--role", "user", "acme 的秘密")
    run(home, "add", "--user", "user_001", "--thread", "t", "--role", "user", "default 的消息")
    acme = out_json(run(home, "history", "--tenant", "acme", "--user", "user_001", "--thread", "t", "--json"))
    default = out_json(run(home, "history", "--user", "user_001", "--thread", "t", "--json"))
    assert [m["content"] for m in acme] == ["acme 的秘密"] and [m["content"] for m in default] == ["default 的消息"]


def test_worker_once_and_db_url(home, tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    run(home, "add", "--db", url, "--user", "u", "--thread", "t", "--role", "user", "hi")
    assert out_json(run(home, "worker", "--once", "--db", url, "--json")) == {
        "ran": 1,
        "failed": 0,
        "errors": [],
    }  # indexed: the default profile retrieves
    assert len(out_json(run(home, "history", "--db", url, "--user", "u", "--thread", "t", "--json"))) == 1
    assert not (home / "memstack.db").exists()


def test_demo_finishes(home):
    proc = run(home, "demo")
    text = proc.stdout.decode()
    for expected in ("全量历史", "滑动窗口", "Token 裁剪", "after a restart", "我的后端使用什么技术？"):
        assert expected in text


class _CannedChat(CannedOpenAI):
    """A real OpenAI-compatible HTTP server on loopback that answers every chat completion with one
    extraction, so the worker subprocess runs the model-backed layers end to end."""

    ANSWER = {
        "memories": [
            {"subject": "用户", "subject_type": "人物", "predicate": "叫", "object": "李四"},
            {"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"},
        ],
        "state": [{"key": "当前项目", "value": "知识中台"}],
    }

    def __init__(self, delay: float = 0.0):
        super().__init__(lambda body: json.dumps(self.ANSWER, ensure_ascii=False), delay=delay, usage=(120, 80))


def test_model_backed_layers_from_the_command_line(home):
    stack = "summary,entities,graph,state"
    for i, (role, text) in enumerate(LISI):
        run(
            home,
            "add",
            "--strategy",
            stack,
            "--user",
            "user_001",
            "--thread",
            "s1",
            "--role",
            role,
            "--at",
            f"2026-11-02T20:0{i}:00+08:00",
            text,
        )
    with _CannedChat() as chat:
        report = out_json(run(home, "worker", "--once", "--model", f"vllm:qwen@{chat.url}", "--json"))
    assert report == {"ran": 1, "failed": 0, "errors": []}
    assert len(chat.requests) == 1 and chat.requests[0]["response_format"]["type"] == "json_schema"
    assert "后端使用SpringBoot" in chat.requests[0]["messages"][-1]["content"]
    names = {e["value"]["name"] for e in out_json(run(home, "entities", "--user", "user_001", "--json"))}
    assert {"用户", "知识中台", "SpringBoot"} <= names
    graph = out_json(run(home, "graph", "--user", "user_001", "--json"))
    assert sorted((r["value"]["source"], r["value"]["target"]) for r in graph) == [("用户", "李四"), ("知识中台", "SpringBoot")]
    assert out_json(run(home, "state", "--user", "user_001", "--json")) == {"当前项目": "知识中台"}
    audit = out_json(run(home, "audit", "--user", "user_001", "--json"))
    assert {e["kind"] for e in audit} == {"summary", "entity", "relation", "state"} and all(e["action"] == "add" for e in audit)
    usage = out_json(run(home, "usage", "--user", "user_001", "--json"))
    assert usage["totals"] == {
        "extract qwen": {
            "calls": 1,
            "failed": 0,
            "prompt_tokens": 120,
            "completion_tokens": 80,
            "seconds": usage["totals"]["extract qwen"]["seconds"],
        }
    }
    text = run(
        home, "context", "--user", "user_001", "--thread", "s1", "--strategy", "summary,entities", "--query", "我的后端是什么？"
    ).stdout.decode()
    assert "知识中台后端使用SpringBoot" in text and "用户叫李四" in text
    assert "知识中台 [项目]" in run(home, "entities", "--user", "user_001").stdout.decode()
    run(home, "forget", "--user", "user_001", "--yes")
    assert out_json(run(home, "audit", "--user", "user_001", "--json")) == []
    assert out_json(run(home, "usage", "--user", "user_001", "--json"))["calls"] == []


def test_a_worker_killed_mid_job_leaves_nothing_half_written_and_the_rerun_duplicates_nothing(home):
    import signal
    import time

    for i, (role, text) in enumerate(LISI):
        run(
            home,
            "add",
            "--strategy",
            "summary,entities,graph",
            "--user",
            "user_001",
            "--thread",
            "s1",
            "--role",
            role,
            "--at",
            f"2026-11-02T20:0{i}:00+08:00",
            text,
        )
    env = {**os.environ, "MEMSTACK_HOME": str(home)}
    with _CannedChat(delay=30) as slow:
        worker = subprocess.Popen(
            [sys.executable, "-m", "memstack", "worker", "--once", "--lease", "2", "--model", f"vllm:qwen@{slow.url}"], env=env
        )
        deadline = time.monotonic() + 60
        while not slow.requests and time.monotonic() < deadline:  # the job is claimed and the model asked
            time.sleep(0.1)
        assert slow.requests
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    assert out_json(run(home, "entities", "--user", "user_001", "--json")) == []  # nothing half-written
    time.sleep(2.5)  # the dead worker's lease runs out
    with _CannedChat() as chat:
        for _ in range(2):  # the rerun, then a second pass that finds nothing to do
            run(home, "worker", "--once", "--model", f"vllm:qwen@{chat.url}")
    assert len(chat.requests) == 1
    entities = out_json(run(home, "entities", "--user", "user_001", "--json"))
    assert sorted(e["value"]["name"] for e in entities) == ["SpringBoot", "用户", "知识中台"]
    assert next(e for e in entities if e["key"] == "user")["value"]["aliases"] == ["李四"]  # "用户叫李四"
    assert all(e["version"] == 1 for e in entities)
    audit = out_json(run(home, "audit", "--user", "user_001", "--json"))
    assert len(audit) == len({(e["kind"], e["key"]) for e in audit})  # each key added once
