"""A real Milvus standalone server for the tests, only ever inside a private network namespace.

The ``milvus`` package (``pip install milvus``, the ``milvus-server`` extra) ships Milvus 2.3
standalone; it listens on every interface, so it may only run where nothing but loopback exists:
``scripts/milvus-tests.sh`` runs pytest under ``unshare --net --map-root-user`` (plus a PID
namespace, so that the server dies with the tests) after ``ip link set lo up``. ``start`` refuses
anywhere else. The server ignores SIGTERM for 15 s and more; its data is the test's, so it is
killed outright.

``Relay`` forwards a loopback port to the server and can cut every connection and refuse new
ones, as a network partition or a dead server would, and then come back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

PORT = 19530
HEALTH_PORT = 9091
#: authentication on, with Milvus's first user (so that the URL's token is tested too)
USER, PASSWORD = "root", "Milvus"
#: a Strong search waits for the next time tick: 200 ms by default, 20 ms here (each test
#: searches dozens of times); the load checks poll faster too (loading a new collection: ~2.5 s)
TUNING = {"proxy.timeTickInterval": 20, "queryCoord.checkInterval": 100, "queryCoord.distPullInterval": 100}


def private_network() -> bool:
    """True when this process's network namespace has no interface but loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """One server for the whole session (a second one could not bind the same ports while the
    first runs): every module that needs a Milvus server takes this fixture."""
    if not private_network():
        reason = "the Milvus server tests run in a private network namespace: bash scripts/milvus-tests.sh"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI runs them there; here they were selected outside it)", pytrace=False)
        pytest.skip(reason)
    pytest.importorskip("milvus", reason="the Milvus server: pip install -e '.[milvus-server]'")
    started = MilvusServer(tmp_path_factory.mktemp("milvus-server")).start()
    print(f"\nMilvus standalone started in {started.started_in:.1f} s, {started.rss_mb():.0f} MB RSS")
    yield started
    print(f"\nMilvus standalone at the end: {started.rss_mb():.0f} MB RSS")
    started.stop()
    shutil.rmtree(started.data_dir, ignore_errors=True)  # its unpacked binaries and data: ~0.5 GB


class MilvusServer:
    """``server = MilvusServer(data_dir).start()``: ``server.url`` is ``milvus://root:Milvus@127.0.0.1:19530``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None
        self.started_in = 0.0

    def start(self) -> MilvusServer:
        if not private_network():
            raise RuntimeError(
                "refusing to start Milvus outside a private network namespace (it listens on every interface): run scripts/milvus-tests.sh"
            )
        from milvus import MilvusServer as Packaged
        from milvus import MilvusServerConfig

        t0 = time.monotonic()
        config = MilvusServerConfig(data_dir=str(self.data_dir))
        config.set("authorization_enabled", True)
        for key, value in TUNING.items():
            config.set(key, value)
        self._server = Packaged(config)
        self._server.listen_port = PORT
        self._server.webservice_port = HEALTH_PORT
        self._server.start()  # waits for /healthz
        self.started_in = time.monotonic() - t0
        return self

    @property
    def url(self) -> str:
        return f"milvus://{USER}:{PASSWORD}@127.0.0.1:{PORT}"

    @property
    def token(self) -> str:
        return f"{USER}:{PASSWORD}"

    @property
    def pid(self) -> int:
        return self._server.server_proc.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        proc = self._server.server_proc if self._server else None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if self._server is not None:
            self._server.server_proc = None
            for f in self._server.proc_fds.values():
                f.close()
            self._server.proc_fds.clear()

    def logs(self, lines: int = 40) -> str:
        path = self.data_dir / "logs" / "milvus-stdout.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


class Relay:
    """A TCP relay from a loopback port to ``target``; ``cut()`` closes every connection and
    refuses new ones, ``restore()`` listens again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> Relay:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a bare close would leave it listening)
            self._listener.close()
            self._listener = None
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._open.clear()

    def restore(self) -> None:
        self.start()

    def url(self, userinfo: str = "") -> str:
        return f"milvus://{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"
