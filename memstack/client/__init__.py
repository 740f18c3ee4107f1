"""A memstack service as a Memory: ``Client`` (blocking) and ``AsyncClient`` (asyncio), over httpx.

    transport.py   what a request is, when a failed try is tried again (Idempotency-Key): sans-IO
    errors.py      the service's error JSON, and a failed connection, as the library's error tree
    values.py      the service's JSON answers as the library's values (Message, Context, Hit, ...)
    steps.py       every method: Memory's signature -> its route(s) -> its value, sans-IO
    tools.py       one user's memory tools (openai_tools, call) for a tool-calling loop
    connection.py  what both clients hold: the checked options, the httpx client, answers asked once
    sync.py        Client: the steps over httpx.Client
    aio.py         AsyncClient: the same steps over httpx.AsyncClient, awaited

``pip install "memstack[client]"`` (httpx); ``memstack.open_memory(url)`` gives a Client for an
``http(s)://`` URL and a Memory for a store URL.
"""

from .aio import AsyncClient
from .sync import Client
from .transport import Retries

__all__ = ["AsyncClient", "Client", "Retries"]
