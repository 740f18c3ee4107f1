"""``memstack ui`` as a real process: on the embedded defaults (the SQLite store under
MEMSTACK_HOME) it serves the dashboard on 127.0.0.1 only, opens it through the browser that
``BROWSER`` names (here a script that writes down the address it was given), and stops cleanly on
Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from ports import free_port

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
pytest.importorskip("jinja2")

from memstack import Memory  # noqa: E402


def launch(tmp_path: Path, *options: str) -> tuple[subprocess.Popen, int, Path]:
    home, opened = tmp_path / "home", tmp_path / "opened.txt"
    opener = tmp_path / "browser.sh"
    opener.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{opened}"\n')
    opener.chmod(0o755)
    with Memory(str(home / "memstack.db")) as memory:  # where the embedded defaults look (MEMSTACK_HOME)
        memory.add({"role": "user", "content": "我叫李四，住在上海"}, user_id="li_si", thread_id="s1")
    port = free_port()
    env = {**os.environ, "MEMSTACK_HOME": str(home), "BROWSER": str(opener)}
    env.pop("MEMSTACK_API_KEYS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memstack", "ui", "--port", str(port), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, port, opened


def wait_for(url: str, proc: subprocess.Popen, timeout: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"memstack ui exited with {proc.returncode}: {proc.stderr.read()}"
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("memstack ui did not answer")


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def others_addresses() -> list[str]:
    """This machine's addresses other than loopback (where the dashboard must not answer)."""
    try:
        found = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except OSError:
        return []
    return sorted(a for a in found if not a.startswith("127."))


@pytest.mark.timeout(120)
def test_memstack_ui_serves_the_dashboard_on_loopback_opens_it_and_stops_on_ctrl_c(tmp_path):
    proc, port, opened = launch(tmp_path)
    try:
        page = wait_for(f"http://127.0.0.1:{port}/ui", proc)
        assert page.status_code == 200 and "li_si" in page.text  # the store under MEMSTACK_HOME, no login (no keys)
        deadline = time.monotonic() + 15
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert opened.read_text() == f"http://127.0.0.1:{port}/ui"  # the browser was sent to the dashboard
        assert "li_si" in httpx.get(f"http://localhost:{port}/ui/user?u=li_si", timeout=5).text
        for address in others_addresses():
            with pytest.raises(httpx.TransportError):
                httpx.get(f"http://{address}:{port}/ui", timeout=2)
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert f"memstack dashboard: http://127.0.0.1:{port}/ui" in err and "Traceback" not in err
