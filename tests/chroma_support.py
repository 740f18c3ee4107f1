"""A real Chroma server (``chroma run``) for the tests, only ever inside a private network namespace.

``chroma run --path DIR --host 127.0.0.1 --port N`` comes with chromadb (the ``chroma`` extra). It
listens where it is told, but it is a server of another project with telemetry of its own, so it
runs like the Milvus server: ``scripts/chroma-tests.sh`` puts pytest under ``unshare --net
--map-root-user`` (plus a PID namespace, so that the server dies with the tests) after ``ip link
set lo up``, and ``chroma_server`` skips anywhere else (fails under CI). One server for the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from milvus_support import private_network
from ports import free_port


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A Chroma server on a loopback port for the whole session: ``.url`` is ``chroma://127.0.0.1:PORT``."""
    if not private_network():
        reason = "the Chroma server tests run in a private network namespace: bash scripts/chroma-tests.sh"
        if os.environ.get("CI"):
            pytest.fail(reason + " (CI runs them there; here they were selected outside it)", pytrace=False)
        pytest.skip(reason)
    pytest.importorskip("chromadb", reason="the Chroma server: pip install -e '.[chroma]'")
    started = ChromaServer(tmp_path_factory.mktemp("chroma-server")).start()
    print(f"\nchroma run started in {started.started_in:.1f} s")
    yield started
    started.stop()
    shutil.rmtree(started.data_dir, ignore_errors=True)


class ChromaServer:
    """``ChromaServer(data_dir).start()``: ``chroma run`` on 127.0.0.1 and a free port, waited for."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.started_in = 0.0
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> ChromaServer:
        if not private_network():
            raise RuntimeError("refusing to start a Chroma server outside a private network namespace: run scripts/chroma-tests.sh")
        import httpx

        chroma = Path(sys.executable).parent / "chroma"
        log = open(self.data_dir / "chroma.log", "wb")  # noqa: SIM115 (the process's, closed with it)
        t0 = time.monotonic()
        command = [str(chroma), "run", "--path", str(self.data_dir / "data"), "--host", "127.0.0.1", "--port", str(self.port)]
        self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        while time.monotonic() - t0 < timeout:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self._proc.returncode}: {self.logs()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", timeout=1).status_code == 200:
                    self.started_in = time.monotonic() - t0
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"chroma run did not answer in {timeout} s: {self.logs()}")

    @property
    def url(self) -> str:
        return f"chroma://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(30)

    def logs(self, lines: int = 40) -> str:
        path = self.data_dir / "chroma.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""
