"""Memory as a service: a REST API over users' memory and an OpenAI-compatible memory proxy.

    api.py        the REST API under /v1/users/{user_id}: messages, threads, context, search,
                  model-made memory and its edits, audit, usage, import/export, deletion
    proxy.py      POST /v1/chat/completions and GET /v1/models: memory added to any chat app
    resend.py     which messages of a resent history are new (pure)
    prompt.py     the upstream request: system, memory, conversation within a budget (pure)
    upstream.py   the upstream model: an OpenAI-compatible endpoint over HTTP, or a ChatModel
    auth.py       API keys -> tenants;   deps.py  what handlers are given, 404 checks
    errors.py     every failure as {"error": {"code", "message", "field"}} with its status
    limits.py     bounded request bodies (413);   metrics.py  Prometheus metrics
    schemas.py    request and response bodies;   app.py  create_app();   run.py  uvicorn

Install with ``pip install "memstack[server]"``; run with ``memstack serve``.
"""

from ..errors import require

require("fastapi", extra="server")

from .app import ServerConfig, create_app  # noqa: E402

__all__ = ["ServerConfig", "create_app"]
