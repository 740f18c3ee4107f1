"""The parser's building blocks: the options every command takes (before or after the command,
their defaults held by the top parser only), a parser whose usage errors are one line and exit 2,
help that keeps its paragraphs, and ``_command``, which gives each subcommand its summary line,
its details and the docs page that tells the rest (tests/test_cli_docs.py holds every help to that
form)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .common import EXIT_USAGE, _DefaultTenant


def _common(p: argparse.ArgumentParser, *, top: bool = False) -> None:
    """The options every command takes, before the command (``memstack --home X import f``) or
    after it. Only the top parser holds their defaults: a subcommand's own default would overwrite
    a value given before the command, so there they default to SUPPRESS (set only when given)."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    p.add_argument("--home", default=default(None), help="directory of the SQLite store (default: $MEMSTACK_HOME or the user data dir)")
    p.add_argument("--db", default=default(None), help="store URL: sqlite:///FILE, jsonl:///DIR, postgresql://..., memory://")
    p.add_argument("--tenant", default=default(_DefaultTenant("default")), help="tenant (default: default)")
    p.add_argument(
        "--vectors",
        default=default(os.environ.get("MEMSTACK_VECTORS") or None),
        metavar="URL",
        help="vector index outside the store: milvus://HOST:PORT[?collection=NAME], milvus:///ABS/FILE.db, chroma://HOST:PORT, chroma:///ABS/DIR (default: $MEMSTACK_VECTORS, else the store's own)",
    )
    p.add_argument("--json", action="store_true", default=default(False), help="machine-readable output")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the whole usage)
        self.exit(EXIT_USAGE, f"memstack: error: {message}\n")


class _Formatter(argparse.HelpFormatter):
    """Descriptions and epilogs keep their paragraphs (each one refilled to the terminal's width)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join(super(_Formatter, self)._fill_text(part, width, indent) for part in text.strip().split("\n\n"))


def _command(sub: Any, name: str, summary: str, docs: str, details: str = "") -> argparse.ArgumentParser:
    """A subcommand: ``summary`` is its line in the command list and the first of its help, in
    ``details`` what more it needs said, and ``docs`` the page that tells the rest."""
    description = "\n\n".join(part for part in (summary[0].upper() + summary[1:] + ".", " ".join(details.split()), f"Docs: {docs}") if part)
    return sub.add_parser(name, help=summary, description=description, formatter_class=_Formatter)
