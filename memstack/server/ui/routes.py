"""The dashboard's routes under ``/ui`` (left out of the OpenAPI document: they are pages, not API)
and its static files, served from the package with the versions pinned in their names."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import FileResponse, Response

from . import actions, pages, session
from .render import HERE

STATIC = HERE / "static"
#: the files under /ui/static/ (nothing else is served from the folder)
FILES = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8", "graph.js": "text/javascript; charset=utf-8"}

PAGES = {
    "": pages.users,
    "/user": pages.user,
    "/thread": pages.thread,
    "/entity": pages.entity,
    "/graph": pages.graph,
    "/context": pages.context,
    "/audit": pages.audit,
    "/usage": pages.usage,
    "/forgotten": pages.forgotten,
}


def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in FILES:
        return Response("not found", status_code=404, media_type="text/plain")
    response = FileResponse(STATIC / name, media_type=FILES[name], headers={"Cache-Control": "public, max-age=3600"})
    session.secure_headers(response)
    return response


def mount(app: Any) -> None:
    for path, handler in PAGES.items():
        app.add_api_route(f"/ui{path}", handler, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui/login", pages.login_form, methods=["GET"], include_in_schema=False)
    app.add_api_route("/ui/login", actions.login, methods=["POST"], include_in_schema=False)
    app.add_api_route("/ui/logout", actions.logout, methods=["POST"], include_in_schema=False)
    app.add_api_route("/ui/do/{action}", actions.act, methods=["POST"], include_in_schema=False)
    app.add_api_route("/ui/static/{name}", static, methods=["GET"], include_in_schema=False)
