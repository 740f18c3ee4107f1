"""Pages from the package's Jinja2 templates (autoescaped: every value a user or a model wrote is
text, never markup), with what every page shows: the words in the browser's language, the tenant,
the CSRF token for its forms, the user's navigation."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse

from ...errors import MissingDependency
from . import session
from .i18n import language, translator

HERE = Path(__file__).parent
_ENV: Any = None


def environment() -> Any:
    global _ENV
    if _ENV is None:
        try:
            import jinja2
        except ImportError as exc:  # the server extra brings it
            raise MissingDependency('the dashboard needs jinja2: pip install "memstack[server]"') from exc
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.globals.update(url=url, day=day, when=when, as_json=as_json, key_id=key_id)
        _ENV = env
    return _ENV


def url(page: str, **params: Any) -> str:
    """``/ui/PAGE?u=...``: ids travel as query values (a user id may hold "/" or "?")."""
    path = "/ui" if page == "users" else f"/ui/{page}"
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


def day(value: datetime | str | None) -> str:
    if value is None:
        return ""
    return (value.isoformat() if isinstance(value, datetime) else str(value))[:10]


def when(value: datetime | str | None) -> str:
    """``2026-11-02 12:05 UTC`` (or ``+0800``): in the time's own offset, as the store gives it."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    offset = value.utcoffset()
    return value.strftime("%Y-%m-%d %H:%M") + ("" if offset is None else " UTC" if not offset else value.strftime(" %z"))


def as_json(value: Any) -> str:
    """JSON for a ``<script type="application/json">`` block: nothing in it can close the tag."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def key_id(key: str) -> str:
    """A record key as a form value (a relation's key holds control characters)."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def key_of(value: str) -> str:
    from ...errors import InvalidInput

    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput("not a record key", field="key") from exc


def page(request: Request, template: str, *, tenant: str | None, status: int = 200, **values: Any) -> HTMLResponse:
    lang = language(request.headers.get("accept-language"))
    t = translator(lang)
    body = (
        environment()
        .get_template(template)
        .render(
            t=t,
            lang=lang,
            tenant=tenant,
            csrf=session.csrf_token(request),
            keys=bool(request.app.state.auth.keys),
            done=request.query_params.get("done", ""),
            n=request.query_params.get("n", ""),
            **values,
        )
    )
    return session.remember(request, HTMLResponse(body, status_code=status))
