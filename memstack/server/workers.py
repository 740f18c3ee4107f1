"""``memstack serve --workers N``: N uvicorn worker processes on one port over one shared store.

uvicorn starts each worker process afresh and builds its app from an import string, so the
service's configuration travels to them as JSON in an environment variable (``ENV``) and
``app_from_env``, the factory each worker calls, rebuilds the ServerConfig from it. Only what JSON
holds travels: the store as a URL, the model as a provider string (objects stay in the process
that made them: serve those with ``create_app`` in one process).

Each worker process is a whole service: its own app, store connections, upstream client and
in-process write-queue worker (unless ``worker=False``). What they must agree on is in the store:
the messages and the proxy's de-duplication (a conditional append), Idempotency-Key answers, the
write queue and its leases, the memory profile. What each keeps to itself: ``/metrics`` (one
process's counts; a scrape through the shared port reaches one process), ``/health``, an
in-process model (each loads its own copy), its token and embedding caches (keyed by content).

A store that processes can share: PostgreSQL (any number of hosts), a SQLite file (WAL, processes
on one host, on a local file system) and a JSON-lines directory (a file lock, likewise one host).
``memory://`` and SQLite's ``:memory:`` live in one process's memory, and are refused.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..errors import UsageError
from .app import ServerConfig, create_app, memory_for
from .protocol import DEFAULT_HEADER_SECONDS, HeadDeadline
from .protocol import ENV as HEADER_ENV
from .run import log_config

log = logging.getLogger("memstack.server")

#: the environment variable holding the worker processes' ServerConfig as JSON (API keys included:
#: like $MEMSTACK_API_KEYS, readable only by the same user and root)
ENV = "MEMSTACK_SERVE_CONFIG"
FACTORY = "memstack.server.workers:app_from_env"


def check_shareable(config: ServerConfig) -> None:
    """UsageError for a store that lives in one process's memory, or vectors in a file that one
    process opens (milvus-lite, Chroma's embedded client)."""
    url = config.db
    if not isinstance(url, str):
        raise UsageError("--workers needs the store as a URL, which every worker process opens")
    if url.startswith("memory://") or url.endswith(":memory:"):
        raise UsageError(
            f"--workers needs a store that processes share, and {url} lives in one process's memory: use postgresql://..., sqlite:///FILE or jsonl:///DIR"
        )
    if isinstance(config.vectors, str) and config.vectors.startswith("milvus:///"):
        raise UsageError(
            "--workers needs vectors that processes share, and a milvus-lite file is opened by one process: use a Milvus server, milvus://HOST:19530"
        )
    if isinstance(config.vectors, str) and config.vectors.startswith("chroma:///"):
        raise UsageError(
            "--workers needs vectors that processes share, and Chroma's embedded client opens its folder in one process: use a Chroma server, chroma://HOST:PORT"
        )


def check_config(config: ServerConfig) -> None:
    """Open the service's Memory once, here: a mistake (a stack the store's profile refuses, a
    vector index that does not answer) is then one error, not a traceback from every worker."""
    memory_for(config).close()


def to_env(config: ServerConfig) -> str:
    """The config as JSON, every field; UsageError for one that JSON cannot hold (an object)."""
    data: dict[str, Any] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        value = dict(value) if isinstance(value, Mapping) else value
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"--workers: the service's {f.name} is {type(value).__name__}, which cannot travel to worker processes; give it as a string (a URL, a provider string)"
            ) from exc
        data[f.name] = value
    return json.dumps(data)


def from_env(text: str) -> ServerConfig:
    return ServerConfig(**json.loads(text))


def app_from_env() -> FastAPI:
    """The app of one worker process, from the config ``serve_workers`` put in ``ENV``."""
    text = os.environ.get(ENV)
    if not text:
        raise UsageError(f"{FACTORY} builds the app of a `memstack serve --workers N` process, from ${ENV}, which is not set")
    return create_app(config=from_env(text))


def serve_workers(
    config: ServerConfig,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    graceful_seconds: float = 30.0,
    log_level: str = "info",
    header_seconds: float | None = DEFAULT_HEADER_SECONDS,
) -> None:
    """Serve ``config`` from ``workers`` processes sharing one listening socket, until SIGTERM or
    SIGINT: uvicorn passes it to each worker, which stops taking requests, lets those in flight
    finish and drains its write queue (``app.py``). A worker that dies is started again."""
    check_shareable(config)
    check_config(config)
    if config.model == "local":
        log.warning("each of the %d worker processes loads its own copy of the local model", workers)
    os.environ[ENV] = to_env(config)
    os.environ[HEADER_ENV] = str(header_seconds or 0)  # HeadDeadline reads it in each worker process
    uvicorn.run(
        FACTORY,
        factory=True,
        http=HeadDeadline,
        workers=workers,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=int(graceful_seconds),
        server_header=False,
        log_config=log_config(log_level),
        **_healthcheck(config),
    )


def _healthcheck(config: ServerConfig) -> dict[str, Any]:
    """uvicorn's supervisor restarts a worker that does not answer its ping within 5 s; a worker
    loading an in-process model may be busy longer (where this uvicorn has the setting)."""
    if "timeout_worker_healthcheck" not in inspect.signature(uvicorn.Config).parameters:
        return {}
    return {"timeout_worker_healthcheck": 120 if config.warm_model else 30}
