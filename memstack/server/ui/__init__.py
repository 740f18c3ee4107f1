"""The memory dashboard at ``/ui``: server-rendered pages over the same library calls as the REST
API (``memstack.views``, ``memstack.edits``, ``Memory``), scoped to the tenant of the API key it
was opened with. ``install(app)`` is the one hook ``create_app`` calls."""

from __future__ import annotations

from typing import Any

PREFIX = "/ui"


def install(app: Any) -> None:
    """Mount the dashboard's routes and static files on the app (``memstack serve`` does)."""
    from .routes import mount

    mount(app)
