"""``memstack chat``: talk to a model with memory in the terminal (needs ``pip install "memstack[chat]"``).

session.py   context -> model -> store, and the data behind each command: no screen
panels.py    what /context, /memories, /state and /help show, as rich renderables
progress.py  bars for model assembly, /import and the exit drain of the write queue
repl.py      the loop: run_chat(memory, model, user_id=..., console=..., read_line=...)
"""

from __future__ import annotations

from .repl import run_chat
from .session import ChatSession, default_thread

__all__ = ["ChatSession", "default_thread", "run_chat"]
