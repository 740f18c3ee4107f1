"""``memstack demo``: the command's help and options; the demo itself is ``memstack.demo``,
imported only when it runs."""

from __future__ import annotations

import argparse
from typing import Any

from .options import _command


def declare_demo(sub: Any) -> None:
    """``memstack demo``."""
    p = _command(
        sub,
        "demo",
        "replay a bundled Chinese conversation and show each strategy's context",
        "docs/cli.md",
        "Two sessions a week apart go into a fresh SQLite file on the embedded defaults (no server, no key, no network); the demo prints the context each strategy builds for the next question, then reopens the file as a restarted process would and continues the conversation. The file is in a temporary directory that the demo removes when it ends (--keep: in the store's home instead).",
    )
    p.add_argument("--keep", action="store_true", help="store the demo under --home/MEMSTACK_HOME instead of a temporary directory")
    p.set_defaults(run=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> None:
    from ..demo import run_demo

    run_demo(args)
