"""A request's head (request line and headers) must arrive within the header deadline
(memstack.server.protocol.HeadDeadline): uvicorn alone kept connections with half-sent heads, or
sending nothing, open for as long as the client liked (20 of 20 still open after 40 s)."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from memstack import Memory
from memstack.server import ServerConfig, create_app
from memstack.server.protocol import ENV, header_seconds
from memstack.server.run import BackgroundServer

HALF_HEAD = b"POST /v1/users/u/threads/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.fixture
def server():
    app = create_app(Memory("memory://", layers="window"), ServerConfig(model="vllm:none@http://127.0.0.1:9/v1", worker=False))
    with BackgroundServer(app, header_seconds=1.0) as s:
        host, port = s.url.removeprefix("http://").split(":")
        s.address = (host, int(port))
        yield s


def closed_within(sockets: list[socket.socket], seconds: float) -> float:
    """Seconds until the server closed every socket (fails past ``seconds``)."""
    started = time.monotonic()
    open_ = list(sockets)
    for s in open_:
        s.settimeout(0.05)
    while open_:
        assert time.monotonic() - started < seconds, f"{len(open_)} of {len(sockets)} connections still open after {seconds} s"
        for s in list(open_):
            try:
                if s.recv(4096) == b"":
                    open_.remove(s)
            except TimeoutError:
                continue
            except OSError:
                open_.remove(s)
    return time.monotonic() - started


def test_connections_with_half_sent_heads_or_nothing_are_closed_and_the_server_still_serves(server):
    stalled = []
    for _ in range(20):
        c = socket.create_connection(server.address)
        c.sendall(HALF_HEAD)
        stalled.append(c)
    stalled.append(socket.create_connection(server.address))  # sends nothing at all
    took = closed_within(stalled, 6.0)
    assert 0.8 <= took < 6.0
    r = httpx.post(f"{server.url}/v1/users/u/threads/t/messages", json={"messages": [{"role": "user", "content": "还在"}]})
    assert r.status_code == 201


def test_a_slow_head_that_arrives_in_time_is_served(server):
    c = socket.create_connection(server.address)
    body = b'{"messages": [{"role": "user", "content": "slow"}]}'
    head = (
        b"POST /v1/users/u/threads/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        % len(body)
    )
    for i in range(0, len(head), 20):  # in pieces over ~0.5 s
        c.sendall(head[i : i + 20])
        time.sleep(0.08)
    time.sleep(0.8)  # past the head deadline since the connection opened: the body has its own limit
    c.sendall(body)
    c.settimeout(5)
    answer = b""
    while chunk := c.recv(65536):
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 201")


def test_a_kept_alive_connection_that_starts_a_second_head_and_stalls_is_closed(server):
    c = socket.create_connection(server.address)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    c.settimeout(5)
    assert c.recv(65536).startswith(b"HTTP/1.1 200")
    time.sleep(2.0)  # idle past the head deadline between requests: keep-alive (5 s) decides, still open
    c.sendall(HALF_HEAD)
    assert closed_within([c], 4.0) >= 0.8


def test_the_deadline_reaches_serve_workers_processes_through_the_environment(monkeypatch):
    class Bare:  # a uvicorn Config built in a worker process carries no memstack attribute
        pass

    monkeypatch.setenv(ENV, "2.5")
    assert header_seconds(Bare()) == 2.5
    monkeypatch.setenv(ENV, "0")
    assert header_seconds(Bare()) is None
    monkeypatch.delenv(ENV)
    assert header_seconds(Bare()) == 10.0
