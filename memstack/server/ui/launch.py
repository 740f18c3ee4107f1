"""``memstack ui``: the service on 127.0.0.1 with the dashboard opened in the browser, on the
embedded defaults (the SQLite store under MEMSTACK_HOME). It runs no write-queue worker and loads
no model until a request needs one: looking at the memory does not change it."""

from __future__ import annotations

import sys
import threading
import webbrowser
from typing import Any


def open_dashboard(store: Any, *, tenant: str, model: str, port: int = 8000, browser: bool = True, vectors: str | None = None) -> None:
    from .. import ServerConfig, create_app
    from ..run import serve

    config = ServerConfig(db=store, model=model, tenant=tenant, vectors=vectors, worker=False)
    url = f"http://127.0.0.1:{port}/ui"
    print(f"memstack dashboard: {url}  (tenant {tenant}; Ctrl-C stops it)", file=sys.stderr)
    opener = threading.Timer(1.0, webbrowser.open, [url])
    if browser:  # webbrowser: the BROWSER environment variable names the browser, if set
        opener.start()
    try:
        serve(create_app(config=config), host="127.0.0.1", port=port, log_level="warning")
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has shut down, and raises the signal again
        print("memstack dashboard: stopped", file=sys.stderr)
    finally:
        opener.cancel()
