"""The dashboard's routes (work in progress: the pages follow)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import PlainTextResponse


def mount(app: Any) -> None:
    app.add_api_route("/ui", lambda: PlainTextResponse("memstack dashboard"), methods=["GET"], include_in_schema=False)
