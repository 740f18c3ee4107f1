"""memstack chat: the REPL in-process (scripted model, console on a StringIO), through a real
pseudo-terminal against a loopback OpenAI-compatible server, and the model assembly's progress."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("rich")
from openai_stub import CannedOpenAI  # noqa: E402
from rich.console import Console  # noqa: E402

from memstack import Memory  # noqa: E402
from memstack.chat import run_chat  # noqa: E402
from memstack.chat.session import SYSTEM_PROMPT, ChatSession  # noqa: E402
from memstack.errors import ModelIntegrityError, ProviderUnavailable  # noqa: E402
from memstack.llm.local import assemble_gguf  # noqa: E402
from memstack.testing.models import ScriptedModel  # noqa: E402

LINE = "我叫李四，我正在开发一个知识中台，后端使用SpringBoot"
REPLY = "你好李四！知识中台听起来很有意思。"
EXTRACTION = {
    "memories": [
        {"subject": "用户", "subject_type": "人物", "predicate": "叫", "object": "李四"},
        {"subject": "知识中台", "subject_type": "项目", "predicate": "后端使用", "object": "SpringBoot"},
    ],
    "state": [{"key": "当前项目", "value": "知识中台"}],
}


def answer(messages, schema):
    """The chat's answer, or, when the extractor asks for a schema, the extraction."""
    return json.dumps(EXTRACTION, ensure_ascii=False) if schema is not None else REPLY


class Lines:
    """An injected line reader: each call returns the next scripted line (EOFError at the end)
    and records the prompt it was asked with."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)


def chat(memory, model, *lines, thread="s1"):
    out = io.StringIO()
    console = Console(file=out, width=140, color_system=None, force_terminal=False)
    status = run_chat(memory, model, user_id="u1", thread_id=thread, console=console, read_line=Lines(*lines))
    return status, out.getvalue()


@pytest.fixture
def model():
    return ScriptedModel(default=answer, native_schema=True)


@pytest.fixture
def memory(model):
    """The same model answers and extracts, as ``memstack chat`` sets it up."""
    with Memory("memory://", layers="summary-buffer,entities,graph,state", options={"model": model}) as mem:
        yield mem


def test_the_repl_answers_stores_and_shows_context_memories_and_state(memory, model):
    status, out = chat(memory, model, LINE, "/context", "/flush", "/memories", "/state", "what now?", "/context", "/help", "/quit")
    assert status == 0 and "memory work done" in out
    assert "/forget all" in out  # /help
    assert REPLY in out
    assert "Context: 1 message," in out and "Token cost by part" in out and "Nothing was dropped." in out
    assert "知识中台" in out and "—后端使用→ SpringBoot" in out  # /memories: entities and relations
    assert "Summary notes" in out
    assert '"当前项目": "知识中台"' in out  # /state
    history = memory.history(user_id="u1", thread_id="s1")
    assert [(m.role, m.text) for m in history] == [("user", LINE), ("assistant", REPLY), ("user", "what now?"), ("assistant", REPLY)]
    chats = [c for c in model.calls if c["schema"] is None]
    assert chats[0]["messages"] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": LINE}]
    second = chats[1]["messages"]
    assert second[0]["role"] == "system" and "SpringBoot" in second[0]["content"]  # the memory, merged into the one system message
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "user"]
    assert "memory:entities" in out  # the second /context shows the sections' costs


def test_forget_asks_first_and_deletes_the_thread_or_the_user(memory, model):
    reader = Lines(LINE, "/forget", "n", "/forget", "y", "/forget all", "yes")
    out = io.StringIO()
    run_chat(memory, model, user_id="u1", thread_id="s1", console=Console(file=out, width=140), read_line=reader)
    text = out.getvalue()
    assert "nothing deleted" in text
    assert text.count("deleted thread 's1'") == 1 and "deleted user 'u1' and everything they own" in text
    assert any("Delete thread 's1'" in p for p in reader.prompts)
    assert memory.history(user_id="u1", thread_id="s1") == []
    assert memory.threads(user_id="u1") == []


def test_errors_are_one_red_line_and_the_chat_goes_on(memory, model):
    model._outputs.append(ProviderUnavailable("the endpoint is down"))
    status, out = chat(memory, model, LINE, "/nope", "/import /does/not/exist.jsonl", "again")
    assert "error: the endpoint is down" in out and "Traceback" not in out
    assert "unknown command /nope" in out and "No such file" in out
    assert REPLY in out  # the next line was answered
    assert [m.role for m in memory.history(user_id="u1", thread_id="s1")] == ["user", "user", "assistant"]  # the failed turn's line is kept


def test_memory_work_that_fails_is_one_red_line_per_run_and_never_a_loop():
    model = ScriptedModel(default=REPLY, native_schema=True)  # answers prose where the extractor wants JSON
    with Memory("memory://", layers="summary", options={"model": model}) as mem:
        status, out = chat(mem, model, LINE, "/flush")
        # /flush fails once and reports it; the batch then waits for its retry (backoff), so the
        # exit drain does not call the broken model again: the turns stay queued, not lost
        assert status == 0 and "Traceback" not in out
        assert out.count("stayed invalid") == 1 and "ran 0 jobs, 1 failed" in out and "0 jobs, 0 failed. Bye." in out
        assert len(model.calls) < 20  # the answer, then one extraction attempt (retries and halving) per run: no loop on a broken model
        assert mem.memories("summary", user_id="u1", thread_id="s1") == []


def test_background_worker_logs_are_one_line_on_the_console_without_a_traceback():
    import logging

    from memstack.chat.repl import _logs_to

    out = io.StringIO()
    console = Console(file=out, width=200)

    def worker():
        try:
            raise ProviderUnavailable("the model is down")
        except ProviderUnavailable:
            logging.getLogger("memstack").exception("background worker: store failure; retrying")

    with _logs_to(console):
        logging.getLogger("memstack").warning("from the REPL's own thread: it reports its errors itself")
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert out.getvalue() == "background worker: store failure; retrying: the model is down\n"


def test_import_stores_an_export_as_this_users_messages(memory, model, tmp_path):
    with Memory("memory://") as elsewhere:
        elsewhere.add([f"第{i}条" for i in range(250)], user_id="someone", thread_id="old")
        exported = list(elsewhere.export(user_id="someone"))
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in exported) + "\n", encoding="utf-8")
    status, out = chat(memory, model, f"/import {path}", f"/import {path}")
    assert "imported 250 messages" in out and "imported 0 messages" in out  # the rerun stores nothing twice
    assert len(memory.history(user_id="u1", thread_id="old")) == 250
    assert memory.threads(user_id="someone") == []


def test_the_context_budget_leaves_room_for_the_answer():
    with Memory("memory://", max_tokens=4000) as mem:
        session = ChatSession(mem, ScriptedModel(context_window=1024), user_id="u1", thread_id="t")
        assert 0 < session.budget < 1024 - session.answer_tokens


def test_assembly_reports_progress_and_skips_it_when_the_file_is_in_place(tmp_path):
    parts = []
    for i, data in enumerate((b"a" * 10_000_000, b"b" * 5)):
        parts.append(tmp_path / f"p{i}")
        parts[-1].write_bytes(data)
    digest = hashlib.sha256(b"a" * 10_000_000 + b"b" * 5).hexdigest()
    seen = []
    dest = assemble_gguf(parts, tmp_path / "m.gguf", digest, progress=lambda done, total: seen.append((done, total)))
    assert dest.stat().st_size == 10_000_005
    assert seen[-1] == (10_000_005, 10_000_005) and len(seen) >= 2 and all(t == 10_000_005 for _, t in seen)
    seen.clear()
    assemble_gguf(parts, tmp_path / "m.gguf", digest, progress=lambda done, total: seen.append((done, total)))
    assert seen == []
    with pytest.raises(ModelIntegrityError):
        assemble_gguf(parts, tmp_path / "bad.gguf", "0" * 64, progress=lambda done, total: None)


def test_a_bar_appears_only_when_there_is_progress_to_show():
    from memstack.chat.progress import lazy_bar

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with lazy_bar(console, "nothing to do"):
        pass
    assert out.getvalue() == ""
    with lazy_bar(console, "assembling", in_bytes=True) as update:
        for done in range(0, 11, 5):
            update(done * 1_000_000, 10_000_000)
    assert "assembling" in out.getvalue()


# ---- through a pseudo-terminal, against a real OpenAI-compatible server on loopback ----------------


def _Canned() -> CannedOpenAI:
    """An OpenAI-compatible chat server on 127.0.0.1: the extraction when a JSON schema is asked
    for, else the canned reply."""
    return CannedOpenAI(lambda body: json.dumps(EXTRACTION, ensure_ascii=False) if body.get("response_format") else REPLY, usage=(50, 20))


class Screen:
    """What a terminal user reads: the child's output with the ANSI escapes (colours, cursor moves
    of spinners and bars) taken out, searched from where the last match ended."""

    ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")

    def __init__(self, child) -> None:
        self.child = child
        self.raw = ""
        self.seen = 0

    def wait_for(self, pattern: str, timeout: float = 20) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            found = re.compile(pattern, re.S).search(self.text, self.seen)
            if found:
                self.seen = found.end()
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} not on the screen; it shows:\n{self.text[self.seen :][-2000:]}")
            with contextlib.suppress(self.child_timeout):
                self.raw += self.child.read_nonblocking(4096, timeout=0.2)

    @property
    def text(self) -> str:
        return self.ANSI.sub("", self.raw)

    @property
    def child_timeout(self):
        import pexpect

        return pexpect.TIMEOUT


@pytest.mark.timeout(60)
def test_the_chat_command_in_a_pseudo_terminal(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    env = {
        **os.environ,
        "MEMSTACK_HOME": str(tmp_path),
        "COLUMNS": "140",
        "LINES": "50",
        "TERM": "xterm-256color",
        "PYTHONIOENCODING": "utf-8",
    }
    with _Canned() as server:
        # the store is configured first (the README's way to the model-backed memory); chat takes
        # the profile's stack and model
        subprocess.run(
            [sys.executable, "-m", "memstack", "init", "--preset", "personal-assistant", "--model", f"vllm:fake@{server.url}"],
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        child = pexpect.spawn(
            sys.executable,
            ["-m", "memstack", "chat", "--user", "u1", "--thread", "s1"],
            env=env,
            encoding="utf-8",
            timeout=30,
            dimensions=(50, 140),
        )
        screen = Screen(child)
        try:
            screen.wait_for("personal-assistant|summary-buffer \\+ profile \\+ retrieval")
            for line, shows in [
                (LINE, ["知识中台听起来很有意思"]),
                ("/context", ["Context: 1 message,", "Token cost by part", "query"]),
                ("/flush", [r"ran [12] jobs?, 0 failed"]),
                ("/memories", ["Entities", "SpringBoot", r"Retrieval finds \d+ earlier rounds? for"]),
                ("/state", ["No state yet"]),  # personal-assistant keeps no JSON state
            ]:
                screen.wait_for("you ›")
                child.sendline(line)
                for pattern in shows:
                    screen.wait_for(pattern)
            screen.wait_for("you ›")
            child.sendline("/forget")
            screen.wait_for(r"Delete thread 's1'.*\[y/N\]")
            child.sendline("y")
            screen.wait_for(r"deleted thread 's1'.*: \d+ records?")
            screen.wait_for("you ›")
            child.sendline("/quit")
            screen.wait_for("Bye.")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0, screen.text[-2000:]
    chats = [r for r in server.requests if not r.get("response_format")]
    assert chats[0]["messages"][0]["content"].startswith(SYSTEM_PROMPT) and chats[0]["messages"][-1]["content"] == LINE
    assert "Traceback" not in screen.text
