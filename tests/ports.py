"""A port for a test's server process, chosen so that nothing else is handed it meanwhile.

Binding port 0 and closing the socket leaves a port from the kernel's ephemeral range, the range
it also hands to every outgoing connection: between the close and the server's own bind, a client
of another suite running beside this one (the tour's pip, the Milvus or browser tests, a load
test's httpx clients) can take it, and the server exits with "Address already in use" (a CI run
failed so). A port below that range is never given out by the kernel; it is taken by a random
draw and checked free, and only another test drawing the same number could still collide.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOW = 20000


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port under the ephemeral range that nothing listens on now."""
    top = max(_LOW + 1000, _ephemeral_start())
    for _ in range(200):
        port = random.randrange(_LOW, top)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between {_LOW} and {top}")
