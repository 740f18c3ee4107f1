"""Running the app under uvicorn: in the foreground until SIGTERM/SIGINT (``memstack serve``), or
in a background thread on a free loopback port (tests, notebooks, embedding in another program).

On SIGTERM uvicorn stops accepting connections, waits up to ``graceful_seconds`` for requests in
flight (an acknowledged add is committed before its response is sent), then runs the app's
shutdown, which drains the write queue.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import uvicorn

from .protocol import DEFAULT_HEADER_SECONDS, HeadDeadline


def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    graceful_seconds: float = 30.0,
    log_level: str = "info",
    header_seconds: float | None = DEFAULT_HEADER_SECONDS,
) -> None:
    """Serve ``app`` until a signal asks it to stop; memstack's own logs go where uvicorn's go.
    ``header_seconds``: each request's head must arrive whole within it (``protocol``; None: no limit)."""
    uvicorn.Server(
        _config(app, host, port, graceful_seconds, log_level, log_config=log_config(log_level), header_seconds=header_seconds)
    ).run()


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging, with the ``memstack`` loggers at ``log_level`` through its stderr
    handler: without it their INFO lines (the first use of the local model assembling 1.1 GB for
    a minute) were dropped, and the server looked hung. For the process that serves: it sets the
    process's logging, which a BackgroundServer inside another program leaves alone."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["memstack"] = {"handlers": ["default"], "level": log_level.upper(), "propagate": False}
    return config


class BackgroundServer:
    """``with BackgroundServer(app) as server: httpx.get(server.url + "/health")``."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        graceful_seconds: float = 10.0,
        log_level: str = "warning",
        header_seconds: float | None = DEFAULT_HEADER_SECONDS,
    ) -> None:
        self.server = uvicorn.Server(_config(app, host, port, graceful_seconds, log_level, header_seconds=header_seconds))
        self._thread = threading.Thread(target=self.server.run, name="memstack-server", daemon=True)
        self.url = ""

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self, timeout: float = 60.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _config(
    app: Any,
    host: str,
    port: int,
    graceful_seconds: float,
    log_level: str,
    log_config: dict[str, Any] | None = None,
    header_seconds: float | None = DEFAULT_HEADER_SECONDS,
) -> uvicorn.Config:
    logs = {"log_config": log_config} if log_config is not None else {}
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_seconds),
        server_header=False,
        http=HeadDeadline,
        **logs,
    )
    config.memstack_header_seconds = header_seconds or 0.0  # read by HeadDeadline; 0: no limit
    return config
