"""No input gives a 500, and nothing invalid is stored: the library's rules of what may be stored
(timestamps in years 1900..9000 UTC, JSON metadata and state values, ids, names, state keys),
applied alike by Python, the REST API (over a real socket: 422 naming the field) and the CLI
(exit 2, one line); and reads and deletes that survive an out-of-range value stored before."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from types import SimpleNamespace

import httpx
import pytest

from memstack import Memory
from memstack.errors import InvalidInput
from memstack.tools import MemoryTools
from memstack.types import MAX_STATE_KEY_CHARS, Change, parse_time

FAR_FUTURE = "9999-12-31T23:59:59-14:00"  # year 10000 in UTC
FAR_PAST = "0001-01-01T00:00:00+14:00"  # year 0 in UTC
#: microseconds since 1970 of those two instants, as the SQLite store keeps them in ts_us
FAR_FUTURE_US = (253402300799 + 14 * 3600) * 10**6
FAR_PAST_US = (-62135596800 - 14 * 3600) * 10**6


def nested(depth: int) -> dict:
    out: dict = {"leaf": 1}
    for _ in range(depth - 1):
        out = {"a": out}
    return out


def refused(field: str):
    """pytest.raises(InvalidInput) that checks the field it names."""

    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(InvalidInput)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            assert self.info.value.field == field, (self.info.value.field, str(self.info.value))
            return handled

    return Check()


# ---- the library ------------------------------------------------------------------------------


def test_timestamps_outside_the_years_1900_to_9000_utc_are_refused_at_every_entry():
    mem = Memory("memory://", layers="window")
    with refused("timestamp"):
        mem.add({"role": "user", "content": "hi", "timestamp": FAR_FUTURE}, user_id="u", thread_id="t")
    with refused("timestamp"):
        mem.add({"role": "user", "content": "hi", "timestamp": "1899-12-31T23:59:59Z"}, user_id="u", thread_id="t")
    with refused("at"):
        mem.add("hi", user_id="u", thread_id="t", at=parse_time(FAR_PAST))
    with refused("records[0].timestamp"):
        mem.import_([{"user_id": "u", "thread_id": "t", "role": "user", "content": "hi", "timestamp": FAR_FUTURE}])
    for read in (
        lambda at: mem.context(user_id="u", thread_id="t", at=at),
        lambda at: mem.search("hi", user_id="u", at=at),
        lambda at: mem.history(user_id="u", thread_id="t", at=at),
    ):
        with refused("at"):
            read(parse_time(FAR_FUTURE))
    assert mem.threads(user_id="u") == []  # nothing was stored
    # the edges of the range are in it
    mem.add({"role": "user", "content": "first", "timestamp": "1900-01-01T00:00:00Z"}, user_id="u", thread_id="t")
    mem.add({"role": "user", "content": "last", "timestamp": "9000-12-31T23:59:59.999999Z"}, user_id="u", thread_id="t")
    assert [m.text for m in mem.history(user_id="u", thread_id="t")] == ["first", "last"]


def test_a_history_read_refuses_a_last_no_store_can_count_to():
    mem = Memory("memory://", layers="window")
    mem.add("hi", user_id="u", thread_id="t")
    with refused("last"):
        mem.history(user_id="u", thread_id="t", last=2**63)
    with refused("last"):
        mem.history(user_id="u", thread_id="t", last=-1)
    assert len(mem.history(user_id="u", thread_id="t", last=2**31 - 1)) == 1


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            {"role": "user", "content": [{"type": "text", "text": None}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            "content",
        ),
        ({"role": "user", "content": "hi", "name": "a\x00b"}, "name"),
        ({"role": "user", "content": "hi", "name": "\ud800"}, "name"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "", "function": {"name": "f"}}]}, "tool_calls[0].id"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": None, "function": {"name": "f"}}]}, "tool_calls"),
        ({"role": "user", "content": "hi", "metadata": {"score": float("nan")}}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": {"score": float("inf")}}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": {"k": "\ud800"}}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": {"k": "a\x00"}}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": nested(65)}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": nested(5000)}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": [1, 2]}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": "note"}, "metadata"),
    ],
)
def test_a_message_that_cannot_be_stored_as_given_is_refused_naming_its_field(message, field):
    mem = Memory("memory://", layers="window")
    with refused(field):
        mem.add(message, user_id="u", thread_id="t")
    with refused(f"records[0].{field}"):
        mem.import_([{"user_id": "u", "thread_id": "t", "timestamp": "2026-01-01T00:00:00Z", **message}])
    assert mem.threads(user_id="u") == []


def test_metadata_nested_64_deep_is_kept():
    mem = Memory("memory://", layers="window")
    mem.add({"role": "user", "content": "hi", "metadata": nested(64)}, user_id="u", thread_id="t")
    assert mem.history(user_id="u", thread_id="t")[0].metadata == nested(64)


def test_one_state_key_rule_for_the_tool_the_api_and_every_writer():
    mem = Memory("memory://", layers="window,state")
    tools = MemoryTools(mem, user_id="u")
    for key in ("k" * (MAX_STATE_KEY_CHARS + 1), "a\x00b", "a\ud800", "tab\there", ""):
        with refused("key"):
            tools.set_state(key, 1)
        with refused("key"):
            Change("put", "state", key, {"value": 1})
    for value in (float("nan"), "a\x00b", "\ud800", nested(65)):
        with refused("value"):
            tools.set_state("k", value)
        with refused("value"):
            Change("put", "state", "k", {"value": value})
    assert tools.set_state("k" * MAX_STATE_KEY_CHARS, nested(64)).startswith("state ")
    Change("delete", "state", "k" * 300)  # a delete names what is stored, whatever was let in before


# ---- reads and deletes survive what was stored before the rules --------------------------------


def corrupt(path, thread: str, ts: str, ts_us: int) -> None:
    """Give a thread's messages an out-of-range timestamp, straight in the SQLite file."""
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE messages SET ts = ?, ts_us = ? WHERE thread_id = ?", (ts, ts_us, thread))
    db.close()


def seeded(path) -> Memory:
    mem = Memory(f"sqlite:///{path}", layers="window,retrieval")
    mem.add([{"role": "user", "content": "我住在杭州"}, {"role": "assistant", "content": "好的"}], user_id="u", thread_id="future")
    mem.add("很久以前", user_id="u", thread_id="past")
    mem.add("今天", user_id="u", thread_id="now")
    corrupt(path, "future", FAR_FUTURE, FAR_FUTURE_US)
    corrupt(path, "past", FAR_PAST, FAR_PAST_US)
    return mem


def test_sqlite_reads_and_deletes_survive_out_of_range_timestamps_already_stored(tmp_path):
    mem = seeded(tmp_path / "m.db")
    assert mem.flush().failed == 0  # the layers' jobs read them too
    threads = {t.thread_id: t for t in mem.threads(user_id="u")}
    assert set(threads) == {"future", "past", "now"} and threads["future"].last_at.year == 9999 and threads["past"].first_at.year == 1
    assert mem.history(user_id="u", thread_id="future")[0].timestamp.isoformat() == FAR_FUTURE
    assert len(list(mem.export(user_id="u"))) == 4
    mem.context(user_id="u", thread_id="future", query="我住在哪里？")
    mem.search("杭州", user_id="u")
    assert mem.forget(user_id="u", thread_id="future") >= 2
    assert mem.forget(user_id="u") >= 2
    assert mem.threads(user_id="u") == []
    mem.close()


def test_postgres_reads_survive_out_of_range_timestamps_already_stored(schema):
    from pgsupport import require_dsn

    dsn = require_dsn("input rules")
    import psycopg

    from memstack.backends.postgres import PostgresStore, quote_identifier

    mem = Memory(PostgresStore(dsn, schema=schema), layers="window")
    mem.add("很久以后", user_id="u", thread_id="future")
    mem.add("今天", user_id="u", thread_id="now")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {quote_identifier(schema)}.memstack_messages SET ts = %s::timestamptz WHERE thread_id = 'future'", (FAR_FUTURE,)
        )
    assert {t.thread_id for t in mem.threads(user_id="u")} == {"future", "now"}
    assert [m.text for m in mem.history(user_id="u", thread_id="future")] == ["很久以后"]
    assert len(list(mem.export(user_id="u"))) == 2
    assert mem.forget(user_id="u") >= 2
    mem.close()


# ---- the REST API -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
    from memstack.server import ServerConfig, create_app
    from memstack.server.run import BackgroundServer
    from memstack.testing import ScriptedModel

    path = tmp_path_factory.mktemp("rest") / "m.db"
    memory = Memory(f"sqlite:///{path}", layers="window,retrieval")
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), worker=False))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield SimpleNamespace(memory=memory, path=path, http=client)


def fails(response: httpx.Response, field: str) -> str:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input" and error["field"] == field, error
    return error["message"]


def test_rest_reads_and_deletes_survive_an_out_of_range_timestamp_already_stored(service):
    http = service.http
    base = "/v1/users/old"
    for thread in ("future", "past"):
        assert (
            http.post(f"{base}/threads/{thread}/messages", json={"messages": [{"role": "user", "content": "我住在杭州"}]}).status_code
            == 201
        )
    corrupt(service.path, "future", FAR_FUTURE, FAR_FUTURE_US)
    corrupt(service.path, "past", FAR_PAST, FAR_PAST_US)
    for path in ("/threads", "/threads/future/messages", "/threads/past/messages", "/export", "/memories/entity", "/state", "/audit"):
        assert http.get(base + path).status_code == 200, (path, http.get(base + path).text)
    assert http.post(f"{base}/threads/future/context", json={"query": "我住在哪里？"}).status_code == 200
    assert http.post(f"{base}/search", json={"query": "杭州"}).status_code == 200
    assert http.delete(f"{base}/threads/future").json() == {"deleted": 1}
    assert http.delete(base).status_code == 200
    assert http.get(f"{base}/threads").status_code == 404


def test_rest_refuses_out_of_range_timestamps_naming_the_field(service):
    http = service.http
    path = "/v1/users/when/threads/t/messages"
    message = fails(
        http.post(path, json={"messages": [{"role": "user", "content": "hi", "timestamp": FAR_FUTURE}]}), "messages[0].timestamp"
    )
    assert "1900" in message and "9000" in message and "timestamp: timestamp" not in message
    fails(http.post(path, json={"messages": [{"role": "user", "content": "hi"}], "at": FAR_PAST}), "at")
    fails(
        http.post(
            "/v1/users/when/import", json={"records": [{"thread_id": "t", "role": "user", "content": "hi", "timestamp": FAR_FUTURE}]}
        ),
        "records[0].timestamp",
    )
    fails(http.post("/v1/users/when/threads/t/context", json={"at": FAR_FUTURE}), "at")
    fails(http.post("/v1/users/when/search", json={"query": "hi", "at": FAR_PAST}), "at")
    assert http.get("/v1/users/when/threads").status_code == 404  # nothing stored
    assert http.post(path, json={"messages": [{"role": "user", "content": "hi"}]}).status_code == 201
    fails(http.get(path, params={"at": FAR_FUTURE}), "at")
    fails(http.get(path, params={"last": 2**63}), "last")


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            {"role": "user", "content": [{"type": "text", "text": None}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            "content",
        ),
        ({"role": "user", "content": "hi", "name": "a\x00b"}, "name"),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "", "function": {"name": "f"}}]}, "tool_calls[0].id"),
        ({"role": "user", "content": "hi", "metadata": nested(300)}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": nested(900)}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": {"k": "\ud800"}}, "metadata"),
    ],
)
def test_rest_refuses_what_cannot_be_stored_as_given(service, message, field):
    http = service.http
    headers = {"content-type": "application/json"}  # json.dumps writes a lone surrogate as its \u escape
    body = json.dumps({"messages": [message]}).encode()
    fails(http.post("/v1/users/bad/threads/t/messages", content=body, headers=headers), f"messages[0].{field}")
    body = json.dumps({"records": [{"thread_id": "t", "timestamp": "2026-01-01T00:00:00Z", **message}]}).encode()
    fails(http.post("/v1/users/bad/import", content=body, headers=headers), f"records[0].{field}")
    assert http.get("/v1/users/bad/threads").status_code == 404


@pytest.mark.parametrize("raw", [b"NaN", b"Infinity", b"-Infinity", b"1e999999"])
def test_rest_refuses_numbers_json_cannot_hold_instead_of_storing_null(service, raw):
    http = service.http
    headers = {"content-type": "application/json"}
    body = b'{"messages":[{"role":"user","content":"hi","metadata":{"score":' + raw + b"}}]}"
    fails(http.post("/v1/users/nan/threads/t/messages", content=body, headers=headers), "messages[0].metadata")
    fails(http.put("/v1/users/nan/state/score", content=b'{"value":' + raw + b"}", headers=headers), "value")
    assert http.get("/v1/users/nan/threads").status_code == 404


@pytest.mark.parametrize("metadata", [[1, 2], "note", 3, True])
def test_rest_import_refuses_metadata_that_is_not_an_object(service, metadata):
    record = {"thread_id": "t", "role": "user", "content": "hi", "timestamp": "2026-01-01T00:00:00Z", "metadata": metadata}
    fails(service.http.post("/v1/users/imp/import", json={"records": [record]}), "records[0].metadata")


def test_rest_state_keys_and_values_follow_the_tools_rule(service):
    http = service.http
    headers = {"content-type": "application/json"}
    fails(http.put("/v1/users/st/state/" + "k" * 300, json={"value": 1}), "key")
    fails(http.put("/v1/users/st/state/" + "k" * (MAX_STATE_KEY_CHARS + 1), json={"value": 1}), "key")
    fails(http.put("/v1/users/st/state/a%00b", json={"value": 1}), "key")
    fails(http.put("/v1/users/st/state/k", json={"value": "a\x00b"}), "value")
    fails(http.put("/v1/users/st/state/k", content=b'{"value": "\\ud800"}', headers=headers), "value")
    fails(http.put("/v1/users/st/state/k", content=b'{"value": {"k": "\\udfff"}}', headers=headers), "value")
    fails(http.put("/v1/users/st/state/k", content=json.dumps({"value": nested(300)}).encode(), headers=headers), "value")
    assert http.get("/v1/users/st/state").status_code == 404  # nothing stored
    assert http.put("/v1/users/st/state/" + "k" * MAX_STATE_KEY_CHARS, json={"value": nested(64)}).status_code == 200
    assert http.get("/v1/users/st/state").json() == {"k" * MAX_STATE_KEY_CHARS: nested(64)}


@pytest.mark.parametrize(
    "body",
    [
        b'{"messages":[{"role":"user","content":"\xff\xfe"}]}',  # not UTF-8
        b'{"messages":[{"role":"user","content":"hi","metadata":{"n":' + b"9" * 5000 + b"}}]}",  # past Python's 4300 digits
        b'{"messages":[{"role":"user","content":"hi","metadata":' + b"[" * 5000 + b"]" * 5000 + b"}]}",  # past the parser's recursion
    ],
)
def test_rest_an_unreadable_body_is_a_422_naming_the_body(service, body):
    fails(service.http.post("/v1/users/raw/threads/t/messages", content=body, headers={"content-type": "application/json"}), "body")


# ---- the command line -------------------------------------------------------------------------


def cli(home, *args):
    env = {**os.environ, "MEMSTACK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "memstack", *args], capture_output=True, env=env, timeout=120)


def test_cli_refuses_an_out_of_range_at_with_one_line_and_reads_what_was_stored_before(tmp_path):
    home = tmp_path / "home"
    refused_at = cli(home, "add", "--user", "u", "--thread", "t", "--role", "user", "--at", FAR_FUTURE, "hi")
    err = refused_at.stderr.decode()
    assert refused_at.returncode == 2 and err.count("\n") == 1 and "--at" in err and "9000" in err, err
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        json.dumps({"user_id": "u", "thread_id": "t", "role": "user", "content": "hi", "timestamp": FAR_PAST}) + "\n", encoding="utf-8"
    )
    imported = cli(home, "import", str(lines))
    assert imported.returncode == 2 and imported.stderr.decode().count("\n") == 1 and "Traceback" not in imported.stderr.decode(), (
        imported.stderr.decode()
    )
    assert cli(home, "add", "--user", "u", "--thread", "t", "--role", "user", "hi").returncode == 0
    corrupt(home / "memstack.db", "t", FAR_FUTURE, FAR_FUTURE_US)
    for args in (
        ("threads", "--user", "u"),
        ("history", "--user", "u", "--thread", "t"),
        ("export", "--user", "u"),
        ("forget", "--user", "u", "--thread", "t", "--yes"),
    ):
        done = cli(home, *args)
        assert done.returncode == 0 and not done.stderr.decode().strip(), (args, done.stderr.decode())
