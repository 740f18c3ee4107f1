"""The MCP server through the official MCP client: ``memstack mcp`` spawned over stdio and served
over streamable HTTP on a loopback port, against a temporary SQLite home. The acceptance test: a
memory saved in one client session is recalled in another, by a new server process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from ports import free_port

from memstack import Memory
from memstack.errors import MissingDependency
from memstack.tools import MemoryTools

mcp = pytest.importorskip("mcp", reason='the MCP server needs: pip install "memstack[mcp]"')
anyio = pytest.importorskip("anyio")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def stdio(home, user="u1", *extra):
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memstack", "mcp", "--user", user, *extra], env={"MEMSTACK_HOME": str(home)}
    )


async def over_stdio(home, calls, user="u1"):
    """Spawn a server, run ``calls`` (name, arguments) in one client session: their results."""
    async with stdio_client(stdio(home, user, "--thread", "s1")) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, arguments) for name, arguments in calls]


async def over_http(url, calls):
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, arguments) for name, arguments in calls]


def text(result) -> str:
    return "\n".join(c.text for c in result.content)


def test_stdio_lists_the_tools_with_the_functions_schemas(tmp_path):
    async def listed():
        async with stdio_client(stdio(tmp_path)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return (await session.list_tools()).tools

    tools = {t.name: t for t in anyio.run(listed)}
    with Memory(tmp_path / "probe.db") as mem:
        expected = {t["function"]["name"]: t["function"] for t in MemoryTools(mem, "u1").openai_tools()}
    assert list(tools) == list(expected)
    for name, tool in tools.items():
        assert tool.description == expected[name]["description"]
        assert list(tool.input_schema["properties"]) == list(expected[name]["parameters"]["properties"])
        assert tool.input_schema.get("required", []) == expected[name]["parameters"].get("required", [])


def test_a_memory_saved_in_one_stdio_session_is_recalled_by_a_new_server_process(tmp_path):
    [saved, bad] = anyio.run(
        over_stdio,
        tmp_path,
        [("save_memory", {"content": "我的后端使用SpringBoot", "category": "tech"}), ("forget_memory", {"memory_id": "note-x"})],
    )
    assert not saved.is_error and text(saved).startswith("saved memory note-")
    assert bad.is_error and "no saved memory with id 'note-x'" in text(bad)
    note = text(saved).split()[2].rstrip(":")

    [recalled, wrong] = anyio.run(
        over_stdio, tmp_path, [("recall_memory", {"query": "我的后端使用什么技术？"}), ("recall_memory", {"query": 3})]
    )
    assert not recalled.is_error and note in text(recalled) and "SpringBoot" in text(recalled)
    assert wrong.is_error

    [other, stolen] = anyio.run(
        over_stdio, tmp_path, [("recall_memory", {"query": "SpringBoot"}), ("forget_memory", {"memory_id": note})], "bob"
    )
    assert text(other) == "no relevant memories found" and stolen.is_error
    with Memory(tmp_path / "memstack.db") as mem:
        assert [u.text for u in mem.store.units.get(mem.scope("u1"), [note])] == ["我的后端使用SpringBoot"]


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    cmd = [sys.executable, "-m", "memstack", "mcp", "--user", "u1", "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen(cmd, env={**os.environ, "MEMSTACK_HOME": str(tmp_path)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the MCP server did not start: {proc.stderr.read().decode(errors='replace')}")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(30)


def test_streamable_http_saves_in_one_session_and_recalls_in_another(tmp_path, http_server):
    [saved] = anyio.run(over_http, http_server, [("save_memory", {"content": "我正在开发一个知识中台，缓存使用Redis"})])
    assert not saved.is_error
    [recalled, state] = anyio.run(
        over_http, http_server, [("recall_memory", {"query": "我的缓存用什么？"}), ("set_state", {"key": "project", "value": "知识中台"})]
    )
    assert "Redis" in text(recalled) and text(state) == 'state project = "知识中台"'
    # and a stdio server started later, on the same home, sees both
    [again, project] = anyio.run(over_stdio, tmp_path, [("recall_memory", {"query": "缓存"}), ("get_state", {"key": "project"})])
    assert "Redis" in text(again) and text(project) == '"知识中台"'


def test_http_refuses_a_non_loopback_address_without_allow_remote(tmp_path):
    cmd = [sys.executable, "-m", "memstack", "mcp", "--user", "u1", "--transport", "http", "--host", "0.0.0.0", "--home", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no authentication" in out.stderr and "--allow-remote" in out.stderr


def test_importing_memstack_does_not_import_mcp():
    code = "import sys, memstack, memstack.cli, memstack.tools, memstack.tool_chat, memstack.mcp_server; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_a_missing_sdk_names_the_extra_to_install(tmp_path, monkeypatch):
    from memstack.mcp_server import build_server

    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # what an uninstalled package looks like to import
    with Memory(tmp_path / "m.db") as mem, pytest.raises(MissingDependency, match=r'pip install "memstack\[mcp\]"'):
        build_server(MemoryTools(mem, "u1"))
