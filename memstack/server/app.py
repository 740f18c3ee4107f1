"""The FastAPI app: the REST API, the OpenAI-compatible proxy, ``/health`` and ``/metrics`` over one
Memory, with the write-queue worker running while it serves.

    app = create_app(config=ServerConfig(db="sqlite:///m.db", model="local"))
    app = create_app(Memory("memory://", layers="entities"), ServerConfig(model=my_chat_model))

A Memory passed in stays the caller's (the app runs and stops its worker, and never closes it);
one built from the config is the app's, closed at shutdown. The routes await an AsyncMemory over
it (``app.state.async_memory``, ``memstack.aio``), whose async pool (PostgreSQL) opens with the
app and whose executor threads end with it. Shutdown stops taking requests, lets
those in flight finish (uvicorn), then drains the write queue for up to ``drain_seconds``: jobs
still left are durable and run at the next start or by ``memstack worker``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request, Response

from .. import __version__
from ..aio import AsyncMemory
from ..errors import MissingDependency
from ..jobs import IDLE_SECONDS
from ..memory import Memory
from ..stores import Store, VectorIndex
from . import api, dify, errors, proxy, tools_api, ui
from .auth import Auth, KeyRequired
from .limits import BodyLimit
from .metrics import Metrics
from .schemas import ErrorOut, Health, error_responses
from .upstream import Upstream, upstream_for

log = logging.getLogger("memstack.server")

DEFAULT_MAX_BODY = 1 << 20
#: an answer's default length when the request sets none: unbounded, the local model on a small
#: machine ran past the upstream timeout and the client got a 504 (BENCHMARKS.md, "Figures behind
#: the defaults"); a ChatGPT-length answer is rarely longer than this
DEFAULT_ANSWER_MAX_TOKENS = 512


@dataclass(frozen=True)
class ServerConfig:
    """How the service runs. ``model``: the proxy's upstream and the model-backed layers' model, a
    provider string ("local", "vllm:M@http://h:8000/v1", ...) or a ChatModel object."""

    #: a store URL, an open Store, or None for the SQLite file under MEMSTACK_HOME
    db: str | Store | None = None
    #: the layers (None: the store's memory profile, see ``memstack init``; a stack given here
    #: must match the profile's write side)
    strategy: str | None = None
    #: one of the articles' scenario stacks (memstack.presets) instead of ``strategy``
    preset: str | None = None
    model: Any = "local"
    embedder: str | None = None
    #: the vector index outside the store: a URL (``milvus://host:19530``) or a VectorIndex;
    #: None: the store's own (see ``Memory``)
    vectors: str | VectorIndex | None = None
    #: API key -> tenant; empty: every request is ``tenant``
    api_keys: Mapping[str, str] = field(default_factory=dict)
    tenant: str = "default"
    #: the token budget of contexts and of the requests the proxy sends upstream
    max_tokens: int | None = 4000
    counter: str | None = None
    #: tokens kept free for the answer when a proxied request names no max_tokens
    completion_tokens: int = 1024
    #: an in-process model's answer bound when the client sets no max_tokens/max_completion_tokens
    #: (None: unbounded); an HTTP upstream gets the client's request as sent
    answer_max_tokens: int | None = DEFAULT_ANSWER_MAX_TOKENS
    upstream_timeout: float = 60.0
    #: seconds after an answer in which an identical request without an Idempotency-Key is a double
    #: submit (it answers the same, stores nothing) rather than a regenerate (``server.copies``)
    double_submit_window: float = 2.0
    #: a streamed answer's whole length at most (``upstream_timeout`` bounds each wait in it)
    upstream_total_timeout: float | None = 600.0
    #: seconds a request body may take to arrive whole; then 408 and the connection is closed
    body_timeout: float | None = 30.0
    #: load an in-process model before the service reports ready (``memstack serve`` does), so
    #: that the first request does not wait for the model's assembly and load
    warm_model: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY
    drain_seconds: float = 30.0
    #: run the write queue in this process (False: ``memstack worker`` processes run it)
    worker: bool = True
    #: seconds a job claimed by this process's worker stays its own while the process lives (its
    #: heartbeat renews it); a killed process's job reruns elsewhere after that
    lease_seconds: float = 300.0
    #: seconds a thread stays quiet before its held-back turns run as at a flush (None: only a flush)
    idle_seconds: float | None = IDLE_SECONDS
    #: with API keys configured, ``/metrics`` needs a key like every ``/v1`` route (closed by
    #: default: the counts by route and status tell a stranger how the service is used); True lets
    #: a Prometheus scraper that sends no key read it (``memstack serve --public-metrics``)
    public_metrics: bool = False
    #: the same for the OpenAPI document and its pages, ``/openapi.json``, ``/docs`` and ``/redoc``
    #: (``--public-docs``: a browser sends no key); ``/health`` is always open
    public_docs: bool = False


def create_app(memory: Memory | None = None, config: ServerConfig | None = None, *, upstream: Upstream | None = None) -> FastAPI:
    config = config or ServerConfig()
    owned = memory is None
    if memory is None:
        memory = memory_for(config)
    upstream = upstream or upstream_for(
        config.model,
        timeout=config.upstream_timeout,
        answer_max_tokens=config.answer_max_tokens,
        total_timeout=config.upstream_total_timeout,
    )
    metrics = Metrics()
    app = FastAPI(
        title="memstack",
        version=__version__,
        summary="Memory for LLM chat apps: a REST API over users' messages and memories, and an OpenAI-compatible proxy that adds them.",
        lifespan=_lifespan(memory, upstream, config, owned),
    )
    app.state.memory = memory
    app.state.async_memory = async_memory = AsyncMemory(memory)
    app.state.auth = Auth(config.api_keys, default_tenant=config.tenant)
    app.state.metrics = metrics
    app.state.proxy = proxy.Proxy(
        async_memory,
        upstream,
        metrics,
        max_tokens=config.max_tokens,
        completion_tokens=config.completion_tokens,
        double_submit_window=config.double_submit_window,
    )
    app.state.ready = False
    errors.install(app)
    app.include_router(api.router)
    app.include_router(api.tenant_router)
    app.include_router(tools_api.router)
    app.include_router(proxy.router)
    app.include_router(dify.router)  # Dify's External Knowledge API (memstack.server.dify)
    ui.install(app)  # the dashboard at /ui (memstack.server.ui)
    app.add_api_route(
        "/health",
        health,
        methods=["GET"],
        tags=["service"],
        summary="200 when the service is ready",
        responses={503: {"model": ErrorOut, "description": "starting, stopping or the store is unreachable"}},
    )
    app.add_api_route(
        "/metrics",
        metrics_text,
        methods=["GET"],
        tags=["service"],
        summary="Prometheus metrics",
        response_class=Response,
        responses=_METRICS_RESPONSES,
    )
    app.add_middleware(KeyRequired, auth=app.state.auth, paths=_private_paths(app, config))
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, body_seconds=config.body_timeout)
    app.add_middleware(metrics.middleware)
    return app


def memory_for(config: ServerConfig) -> Memory:
    """The Memory the config describes (its store, layers, model and embedder as options)."""
    options = {k: v for k, v in (("model", config.model), ("embedder", config.embedder)) if v is not None}
    return Memory(
        config.db,
        layers=config.strategy,
        preset=config.preset,
        max_tokens=config.max_tokens,
        counter=config.counter,
        tenant=config.tenant,
        options=options,
        vectors=config.vectors,
        lease_seconds=config.lease_seconds,
        idle_seconds=config.idle_seconds,
    )


_METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "the Prometheus text format"},
    401: {**error_responses(401)[401], "description": "API keys are configured and the metrics are not public (--public-metrics)"},
}


def _private_paths(app: FastAPI, config: ServerConfig) -> list[str]:
    """The routes outside /v1 that need a key when keys are configured (see ServerConfig)."""
    paths = [] if config.public_metrics else ["/metrics"]
    if not config.public_docs:
        paths += [p for p in (app.openapi_url, app.docs_url, app.swagger_ui_oauth2_redirect_url, app.redoc_url) if p]
    return paths


async def health(request: Request) -> Health:
    if not request.app.state.ready:
        raise errors.ApiError(503, "not_ready", "the service is starting or stopping")
    return Health(status="ok", pending_jobs=await request.app.state.async_memory.pending())


async def metrics_text(request: Request) -> Response:
    body, content_type = request.app.state.metrics.render(await request.app.state.async_memory.pending())
    return Response(body, media_type=content_type)


def _lifespan(memory: Memory, upstream: Upstream, config: ServerConfig, owned: bool):
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warm = getattr(upstream, "warm", None)
        if config.warm_model and callable(warm):
            try:
                await anyio.to_thread.run_sync(warm)
            except MissingDependency as exc:
                # the REST API, the dashboard and the tools need no chat model: they serve, and the
                # proxy answers 501 with the same install command until the model is there
                log.warning("the proxy's model cannot load: %s; the REST API serves, the proxy answers 501", exc)
        await app.state.async_memory.open()
        if config.worker:
            memory.retention_tenants.update(config.api_keys.values())  # the retention pass covers every tenant served
            memory.start_worker()
        app.state.ready = True
        try:
            yield
        finally:
            app.state.ready = False
            await upstream.aclose()
            await _drain(memory, config.drain_seconds, close=owned)
            await app.state.async_memory.close()  # its pool and threads (the Memory is closed above, or the caller's)

    return lifespan


async def _drain(memory: Memory, seconds: float, *, close: bool) -> None:
    """Stop the worker after it finishes the queued jobs (closing the memory if it is the app's);
    past ``seconds`` give up waiting: what is left stays queued in the store."""

    def stop() -> None:
        memory.stop_worker(drain=True)
        if close:
            memory.close()

    worker = threading.Thread(target=stop, name="memstack-drain", daemon=True)
    worker.start()
    await asyncio.to_thread(worker.join, seconds)
    if worker.is_alive():
        log.warning(
            "shutdown: the write queue did not drain within %.0f s; the rest stays queued for the next start or `memstack worker`", seconds
        )
