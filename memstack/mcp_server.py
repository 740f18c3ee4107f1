"""The memory tools as an MCP server (official ``mcp`` SDK, 2.x): any MCP client (Claude Desktop,
IDE agents, ``mcp.ClientSession``) can save, recall and forget one user's memories.

    memstack mcp --user u1                               # stdio: the client spawns this process
    memstack mcp --user u1 --transport http --port 8765  # streamable HTTP at http://127.0.0.1:8765/mcp

The server is one user's: MCP has no notion of whose memory a call is, so the user is fixed when
the server starts. The tools are ``MemoryTools``' own functions (same names, signatures and
descriptions as the OpenAI schemas); a MemstackError becomes the MCP tool error the model reads
(``isError``), never a crashed session. Over HTTP there is no authentication: the server binds to
loopback unless told otherwise (``allow_remote``). ``mcp`` is imported only here, when a server is
built (``pip install "memstack[mcp]"``).
"""

from __future__ import annotations

import functools
import ipaddress
import sys
from collections.abc import Callable
from typing import Any

from .errors import MemstackError, UsageError, require
from .tools import MemoryTools, ToolSpec

TRANSPORTS = ("stdio", "http")
#: where the streamable HTTP endpoint is served
HTTP_PATH = "/mcp"


def build_server(tools: MemoryTools, *, name: str = "memstack", log_level: str = "WARNING") -> Any:
    """An ``MCPServer`` exposing every tool of ``tools`` (not yet running); the SDK logs to stderr
    at ``log_level`` (stdout is the stdio transport's channel)."""
    mcpserver = require("mcp.server.mcpserver", extra="mcp", package="mcp")
    exceptions = require("mcp.server.mcpserver.exceptions", extra="mcp", package="mcp")
    user = tools.scope.user_id
    server = mcpserver.MCPServer(
        name=name,
        log_level=log_level.upper(),
        instructions=f"Long-term memory of user {user!r}: save_memory what the user asks you to remember; "
        "recall_memory before answering questions about the user; forget_memory on request.",
    )
    for spec in tools.specs().values():
        server.add_tool(_as_mcp_tool(spec, exceptions.ToolError), name=spec.name, description=spec.description, structured_output=False)
    return server


def _as_mcp_tool(spec: ToolSpec, tool_error: type[Exception]) -> Callable[..., str]:
    """The tool's function with memstack errors raised as the SDK's ToolError (reported to the
    client as a tool error, logged as an expected failure) and the spec's signature for the SDK
    to derive the same schema from."""

    @functools.wraps(spec.function)
    def run(**arguments: Any) -> str:
        try:
            return spec.function(**arguments)
        except MemstackError as exc:
            raise tool_error(str(exc)) from exc

    run.__signature__ = spec.signature  # type: ignore[attr-defined]
    return run


def serve(
    tools: MemoryTools,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    allow_remote: bool = False,
    log_level: str = "WARNING",
) -> None:
    """Run the server until the client disconnects (stdio) or the process is stopped (http)."""
    if transport not in TRANSPORTS:
        raise UsageError(f"unknown MCP transport {transport!r}; expected one of {', '.join(TRANSPORTS)}")
    if transport == "http" and not (allow_remote or is_loopback(host)):
        raise UsageError(
            f"the MCP server has no authentication: refusing to listen on {host}; use 127.0.0.1, or pass --allow-remote behind an authenticating proxy"
        )
    server = build_server(tools, log_level=log_level)
    if transport == "stdio":
        server.run("stdio")
        return
    print(f"MCP server on {http_url(host, port)} (streamable HTTP; Ctrl-C stops it)", file=sys.stderr, flush=True)
    server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)


def http_url(host: str, port: int) -> str:
    """The endpoint a client connects to, said at start: the SDK logs nothing at the default
    level, and the path (/mcp) is not guessable from --host and --port alone."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{HTTP_PATH}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
