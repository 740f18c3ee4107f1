"""API keys -> tenants: a request's key decides whose users it may touch.

Keys come from ``MEMSTACK_API_KEYS="key1:tenantA,key2:tenantB"`` or ``--api-key KEY:TENANT``
(repeatable) and are sent as ``Authorization: Bearer KEY`` (what the openai SDK sends) or
``X-API-Key: KEY``. With no keys configured every request is the one default tenant, and the
server may listen on a loopback address only (``check_exposure``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import Request

from ..errors import InvalidInput, UsageError
from ..types import Scope
from .errors import ApiError, error_response

ENV = "MEMSTACK_API_KEYS"


def parse_api_keys(items: str | Iterable[str]) -> dict[str, str]:
    """``"k1:tenantA,k2:tenantB"`` (or a list of ``KEY:TENANT``) -> {key: tenant}; the tenant
    follows the LAST colon. UsageError on a malformed item (the message never shows the key)."""
    parts = items.split(",") if isinstance(items, str) else list(items)
    keys: dict[str, str] = {}
    for n, item in enumerate((p.strip() for p in parts if p.strip()), 1):
        key, colon, tenant = item.rpartition(":")
        if not colon or not key.strip() or not tenant.strip():
            raise UsageError(f"API key #{n} is not KEY:TENANT")
        try:
            Scope(user_id="probe", tenant=tenant.strip())
        except InvalidInput as exc:
            raise UsageError(f"API key #{n}: bad tenant: {exc}") from exc
        keys[key.strip()] = tenant.strip()
    return keys


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, keys: Mapping[str, str]) -> None:
    """Refuse to serve a non-loopback address without API keys: anyone who can reach it would
    read and delete every user's memory."""
    if not keys and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without API keys: set {ENV}=KEY:TENANT or pass --api-key KEY:TENANT, or listen on 127.0.0.1"
        )


class Auth:
    """Maps a request's key to its tenant; without keys everything is ``default_tenant``."""

    def __init__(self, keys: Mapping[str, str] | None = None, *, default_tenant: str = "default") -> None:
        self.keys = dict(keys or {})
        self.default_tenant = default_tenant

    def tenant_for(self, request: Request) -> str:
        if not self.keys:
            return self.default_tenant
        key = _presented_key(request)
        if key is None:
            raise ApiError(401, "unauthorized", "an API key is required: send Authorization: Bearer KEY")
        for known, tenant in self.keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                return tenant
        raise ApiError(401, "unauthorized", "unknown API key")


def _presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


class KeyRequired:
    """ASGI middleware: a request for one of ``paths`` needs a configured API key, as every route
    under ``/v1`` does (401 otherwise); with no keys configured everything passes. It guards the
    routes that are not the API's own: ``/metrics``, the OpenAPI document and its HTML pages (each
    public only by choice: ``ServerConfig.public_metrics``, ``public_docs``)."""

    def __init__(self, app: Any, auth: Auth, paths: Iterable[str]) -> None:
        self.app = app
        self.auth = auth
        self.paths = frozenset(paths)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.auth.keys and scope["path"] in self.paths:
            try:
                self.auth.tenant_for(Request(scope))
            except ApiError as exc:
                await error_response(exc.status, exc.code, str(exc), exc.field, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)
