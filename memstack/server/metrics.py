"""Prometheus metrics of one app, in a registry of its own (two apps in a process never collide).

memstack_http_requests_total{method,route,status}   requests, by route template (not raw path)
memstack_http_request_seconds{method,route}         latency until the response finished
memstack_upstream_requests_total{outcome}           proxy calls to the model: ok, timeout, error
memstack_upstream_seconds                           their latency
memstack_jobs_pending                               write-queue jobs with work left (at scrape)
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .limits import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "<unmatched>"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("memstack_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("memstack_http_request_seconds", "HTTP request latency", ["method", "route"], registry=self.registry)
        self.upstream = Counter("memstack_upstream_requests", "calls to the upstream chat model", ["outcome"], registry=self.registry)
        self.upstream_latency = Histogram(
            "memstack_upstream_seconds",
            "upstream chat model latency",
            registry=self.registry,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.copies = Counter(
            "memstack_proxy_copies",
            "chat completions that found a copy of themselves claimed (a retry with a key, a double submit)",
            ["outcome"],
            registry=self.registry,
        )
        self.pending = Gauge("memstack_jobs_pending", "write-queue jobs with work left", registry=self.registry)

    def render(self, pending_jobs: int) -> tuple[bytes, str]:
        self.pending.set(pending_jobs)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def seen_routes(self) -> set[tuple[str, str]]:
        """(method, route template) of every request counted so far."""
        return {
            (s.labels["method"], s.labels["route"])
            for metric in self.requests.collect()
            for s in metric.samples
            if s.name.endswith("_total")
        }

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """Count every request by its route template (known after routing) and final status."""

        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            status = 500
            started = time.perf_counter()

            async def watch(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, watch)
            finally:
                route = _route_of(scope, status)
                self.requests.labels(scope["method"], route, str(status)).inc()
                self.latency.labels(scope["method"], route).observe(time.perf_counter() - started)

        return measured


def _route_of(scope: Scope, status: int) -> str:
    """The matched route's template; routes that do not record themselves in the scope (the
    framework's own, such as /docs) have static paths, counted as such when they answered 200."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    if path:
        return path
    return scope["path"] if status == 200 else UNMATCHED
