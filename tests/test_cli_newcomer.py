"""The first hour of a new user on the command line (issue 13, §2): each dead end a newcomer met,
run as a real process against a real SQLite home, as tests/test_cli.py does."""

import json
import os
import select
import subprocess
import sys

import pytest
from ports import free_port
from test_cli import LISI, out_json, run, seed

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.views import render


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def fails(proc, code=2):
    """The one stderr line of a refused command, after checking its exit status."""
    err = proc.stderr.decode().strip()
    assert proc.returncode == code, err
    assert len(err.splitlines()) == 1 and err.startswith("memstack: error:"), err
    return err


def contents(home, thread="t", *extra):
    return [m["content"] for m in out_json(run(home, "history", "--user", "u", "--thread", thread, "--json", *extra))]


# ---- stdin ------------------------------------------------------------------------------------


def test_stdin_loses_exactly_one_trailing_newline(home):
    for given in ("后端使用SpringBoot\n", "两行\n\n", "  缩进\r\n", "没有换行"):
        run(home, "add", "--user", "u", "--thread", "t", "--role", "user", "-", input=given.encode())
    assert contents(home) == ["后端使用SpringBoot", "两行\n", "  缩进", "没有换行"]


# ---- naive times ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["add", "--role", "user", "hi"], ["context"], ["search", "hi"]])
@pytest.mark.parametrize("at", ["2026-03-01T09:00:00", "2026-03-01"])
def test_a_naive_at_is_refused_naming_the_form_with_an_offset(home, command, at):
    thread = [] if command[0] == "search" else ["--thread", "t"]
    err = fails(run(home, command[0], "--user", "u", *thread, "--at", at, *command[1:], check=False))
    assert "--at" in err and "no UTC offset" in err and "+08:00" in err


def test_import_refuses_a_naive_timestamp_naming_its_line(home, tmp_path):
    good = {"user_id": "u", "thread_id": "t", "role": "user", "content": "好", "timestamp": "2026-03-01T09:00:00+08:00"}
    bad = {**good, "content": "坏", "timestamp": "2026-03-01T09:05:00"}
    dump = tmp_path / "naive.jsonl"
    dump.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    err = fails(run(home, "import", str(dump), check=False))
    assert f"{dump}:3: timestamp:" in err and "no UTC offset" in err and "+08:00" in err
    assert "record" not in err
    fails(run(home, "threads", "--user", "u", check=False), code=1)  # nothing was written


def test_the_library_refuses_a_naive_timestamp_string_as_a_naive_datetime():
    with Memory("memory://") as mem, pytest.raises(InvalidInput, match="no UTC offset"):
        mem.add({"role": "user", "content": "hi", "timestamp": "2026-03-01T09:00:00"}, user_id="u", thread_id="t")


# ---- history order ----------------------------------------------------------------------------


def test_history_reads_in_time_order_after_a_back_dated_add(home):
    for text, at in (
        ("十点", "2026-03-01T10:00:00+08:00"),
        ("十点五分", "2026-03-01T10:05:00+08:00"),
        ("九点", "2026-03-01T01:00:00Z"),
        ("也是十点", "2026-03-01T10:00:00+08:00"),
    ):
        run(home, "add", "--user", "u", "--thread", "t", "--role", "user", "--at", at, text)
    assert contents(home) == ["九点", "十点", "也是十点", "十点五分"]
    assert contents(home, "t", "--last", "2") == ["也是十点", "十点五分"]
    text = run(home, "history", "--user", "u", "--thread", "t").stdout.decode().splitlines()
    assert [line.split("] ")[1] for line in text] == ["九点", "十点", "也是十点", "十点五分"]


def test_rest_history_reads_in_the_same_order():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from memstack.server import ServerConfig, create_app

    memory = Memory("memory://", layers="window")
    for text, at in (("十点", "2026-03-01T10:00:00+08:00"), ("九点", "2026-03-01T09:00:00+08:00")):
        memory.add({"role": "user", "content": text, "timestamp": at}, user_id="u", thread_id="t")
    with TestClient(create_app(memory, ServerConfig(worker=False))) as http:
        got = http.get("/v1/users/u/threads/t/messages")
        assert got.status_code == 200, got.text
        assert [m["content"] for m in got.json()] == ["九点", "十点"]
        assert [m["content"] for m in http.get("/v1/users/u/threads/t/messages", params={"last": 1}).json()] == ["十点"]
    assert [m.text for m in memory.history(user_id="u", thread_id="t")] == ["九点", "十点"]
    assert [m.text for m in memory.history(user_id="u", thread_id="t", order="append")] == ["十点", "九点"]  # LangChain's


# ---- global options, --version, bare memstack ------------------------------------------------


def test_global_options_go_before_or_after_the_command(home, tmp_path):
    other = tmp_path / "other"
    run(home, "--home", str(other), "--tenant", "acme", "add", "--user", "u", "--thread", "t", "--role", "user", "你好")
    dump = run(home, "--home", str(other), "--tenant", "acme", "export", "--user", "u").stdout
    (tmp_path / "u.jsonl").write_bytes(dump)
    assert out_json(run(home, "--home", str(tmp_path / "third"), "--json", "import", str(tmp_path / "u.jsonl")))["imported"] == 1
    assert [
        m["content"]
        for m in out_json(run(home, "--json", "history", "--user", "u", "--thread", "t", "--home", str(other), "--tenant", "acme"))
    ] == ["你好"]
    assert not home.exists()  # every command used the --home given before (or after) it


def test_version_and_bare_memstack(home):
    from importlib.metadata import version

    assert run(home, "--version").stdout.decode().strip() == f"memstack {version('memstack')}"
    bare = run(home, check=False)
    assert bare.returncode == 2
    listed = bare.stderr.decode()
    for command in ("add", "context", "history", "import", "worker", "serve", "mcp", "demo"):
        assert f"\n    {command} " in listed, command


# ---- import of stored messages ---------------------------------------------------------------


def test_import_says_how_many_were_already_stored(home, tmp_path):
    seed(home)
    dump = run(home, "export", "--user", "user_001").stdout
    assert (
        run(home, "import", "-", input=dump).stdout.decode().strip() == f"imported 0 of {len(LISI)} messages ({len(LISI)} already stored)"
    )
    assert out_json(run(home, "import", "-", "--json", input=dump)) == {"imported": 0, "records": 6, "already_stored": 6}
    one = dump.decode().splitlines()[0].encode() + b"\n"
    assert run(tmp_path / "fresh", "import", "-", input=one).stdout.decode().strip() == "imported 1 of 1 message"


# ---- unknown users and threads ----------------------------------------------------------------


def test_an_unknown_user_or_thread_is_not_found_as_over_rest(home):
    assert "no such user 'nobody'" in fails(run(home, "threads", "--user", "nobody", check=False), code=1)
    assert "no such user 'nobody'" in fails(run(home, "history", "--user", "nobody", "--thread", "t", "--json", check=False), code=1)
    assert "no such user 'nobody'" in fails(run(home, "export", "--user", "nobody", check=False), code=1)
    run(home, "add", "--user", "u", "--thread", "t", "--role", "user", "hi")
    assert "user 'u' has no thread 'x'" in fails(run(home, "history", "--user", "u", "--thread", "x", check=False), code=1)
    assert "no such user 'u'" in fails(run(home, "threads", "--user", "u", "--tenant", "acme", check=False), code=1)
    assert contents(home, "t", "--last", "0") == []  # a known thread read as empty is not an error


# ---- wording ----------------------------------------------------------------------------------


def test_counts_agree_with_their_noun(home):
    from memstack.views import plural

    assert [plural(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    run(home, "add", "--user", "u", "--thread", "t", "--role", "user", "hi")
    assert "\t1 message\t" in run(home, "threads", "--user", "u").stdout.decode()
    assert run(home, "forget", "--user", "u", "--thread", "t", "--yes").stdout.decode().strip().endswith(": 1 record")


def test_an_entity_without_a_description_has_no_empty_part():
    entity = {"key": "user", "value": {"name": "用户", "type": "人物", "description": "", "attributes": {"城市": {"value": "杭州"}}}}
    assert render("entities", [entity]) == "用户 [人物]: 城市=杭州"
    bare = {"key": "x", "value": {"name": "X", "type": "项目"}}
    assert render("entities", [bare]) == "X [项目]"
    assert render("entities", [{**entity, "value": {**entity["value"], "description": "本人"}}]) == "用户 [人物]: 本人 | 城市=杭州"


def test_context_of_nothing_reports_no_empty_parts(home):
    text = run(home, "context", "--user", "u", "--thread", "t", "--strategy", "window").stdout.decode()
    assert text.strip() == "-- 0 tokens (estimate), budget 4000"


def test_an_unknown_layer_lists_only_the_layers_a_stack_may_name(home):
    err = fails(run(home, "context", "--user", "u", "--thread", "t", "--strategy", "window,nope", check=False))
    assert "'nope'" in err and "window" in err and "summary-buffer" in err
    assert "extract" not in err


# ---- demo, mcp ---------------------------------------------------------------------------------


def test_demo_removes_its_temporary_store(home, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "MEMSTACK_HOME": str(home), "TMPDIR": str(scratch)}
    proc = subprocess.run([sys.executable, "-m", "memstack", "demo"], capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "memstack-demo-" in proc.stdout.decode()
    assert not list(scratch.glob("memstack-demo-*"))
    assert not home.exists()


def test_mcp_over_http_says_where_it_listens(tmp_path):
    pytest.importorskip("mcp")
    port = free_port()
    cmd = [sys.executable, "-m", "memstack", "mcp", "--user", "u1", "--transport", "http", "--port", str(port), "--home", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "the MCP server said nothing on stderr within 60 s"
        line = proc.stderr.readline().decode()
        assert line.strip().startswith(f"MCP server on http://127.0.0.1:{port}/mcp"), line
    finally:
        proc.terminate()
        proc.wait(30)
