"""Who is looking at the dashboard, and whether a form was sent by it.

- **Tenant**: with API keys configured, the login form takes a key and sets an HttpOnly,
  SameSite=Strict cookie holding ``session_token(key, issued)``: the login's time and an HMAC of
  it under the key (the cookie never holds the key, and is no API key); every page maps it back
  to the key's tenant, so the dashboard sees exactly what that key sees through the API, in every
  server process. A session ends ``SESSION_SECONDS`` after its login (a copied cookie does not
  work for ever), and removing the key from the configuration ends its sessions at once. Without
  keys every page is the default tenant, and is answered only to a loopback client that names a
  loopback host (``Host: 127.0.0.1:8000``, ``localhost``): a web page elsewhere cannot reach it
  through a rebound DNS name.
- **CSRF**: every page sets a random ``memstack_csrf`` cookie (SameSite=Strict) once, and every
  form carries its value; a POST whose field differs from the cookie, or whose ``Origin`` is not
  this server, is refused (403) before anything is read or written.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from urllib.parse import urlsplit

from fastapi import Request, Response

from ..auth import is_loopback

SESSION_COOKIE = "memstack_ui"
CSRF_COOKIE = "memstack_csrf"
_SALT = b"memstack-ui-session-v2"
#: how long a dashboard login lasts: a working day
SESSION_SECONDS = 12 * 3600
#: how far in the future a login may seem to have been made (another process's clock)
_SKEW_SECONDS = 300


class Refused(Exception):
    """A request the dashboard will not answer: ``login`` (send to the login form) or 403."""

    def __init__(self, reason: str, *, login: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.login = login


def now() -> int:
    return int(time.time())


def session_token(key: str, issued: int) -> str:
    """The cookie of a login with ``key`` at ``issued`` (Unix seconds): "ISSUED.HMAC"."""
    return f"{issued}.{hmac.new(key.encode(), _SALT + str(issued).encode(), hashlib.sha256).hexdigest()}"


def _issued(token: str) -> int | None:
    """The login time a cookie names, when it is still within its session; else None."""
    stamp = token.partition(".")[0]
    if not stamp.isdigit() or len(stamp) > 12:
        return None
    issued = int(stamp)
    age = now() - issued
    return issued if -_SKEW_SECONDS <= age <= SESSION_SECONDS else None


def tenant_of_key(keys: Mapping[str, str], key: str) -> str | None:
    """The tenant of a presented key (compared in constant time), or None."""
    found = None
    for known, tenant in keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            found = tenant
    return found


def tenant_of(request: Request) -> str:
    """The tenant this request may see, or ``Refused``."""
    auth = request.app.state.auth
    if not auth.keys:
        check_loopback(request)
        return auth.default_tenant
    token = request.cookies.get(SESSION_COOKIE, "")
    issued = _issued(token)
    found = None
    for key, tenant in auth.keys.items():
        if issued is not None and hmac.compare_digest(session_token(key, issued).encode(), token.encode()):
            found = tenant
    if found is None:
        raise Refused("login", login=True)
    return found


def check_loopback(request: Request) -> None:
    client = request.client.host if request.client else ""
    host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    if not (is_loopback(client) and is_loopback(host)):
        raise Refused("loopback")


def csrf_token(request: Request) -> str:
    """The request's CSRF token: its cookie's, or a new one (set on the response by ``remember``)."""
    token = request.cookies.get(CSRF_COOKIE, "")
    if len(token) < 32:
        token = request.state.__dict__.setdefault("new_csrf", secrets.token_urlsafe(32))
    return token


def check_form(request: Request, form: Mapping[str, object]) -> None:
    """Refused unless the form's ``csrf`` field is the cookie's and the Origin (when sent) is this server."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = form.get("csrf")
    if len(cookie) < 32 or not isinstance(sent, str) or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise Refused("csrf")
    origin = request.headers.get("origin")
    if origin is not None and origin != "null":
        mine = request.headers.get("host", "")
        if urlsplit(origin).netloc != mine:
            raise Refused("csrf")
    elif origin == "null":
        raise Refused("csrf")


def remember(request: Request, response: Response) -> Response:
    """Set the CSRF cookie a page handed out, and the headers every dashboard response carries."""
    new = request.state.__dict__.get("new_csrf")
    if new:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/ui")
    secure_headers(response)
    return response


def login(request: Request, response: Response, key: str) -> bool:
    """Set the session cookie when ``key`` is a configured key; False otherwise."""
    keys = request.app.state.auth.keys
    if tenant_of_key(keys, key.strip()) is None:
        return False
    response.set_cookie(
        SESSION_COOKIE,
        session_token(key.strip(), now()),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/ui",
    )
    return True


def logout(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/ui")


#: scripts and styles only from the dashboard's own files (no inline script, no CDN); no framing
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def secure_headers(response: Response) -> None:
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"  # no-referrer would make a form's Origin "null"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
