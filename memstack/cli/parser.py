"""The ``memstack`` parser: the top level (description, epilog, --version, the common options)
and the commands, each declared by its own module's ``declare_*``. COMMANDS is the order of the
command list in ``memstack --help`` and of the sections of docs/cli.md (docs/gen_cli.py), so a
command is added there, in its place; the command modules load nothing heavy at import (the
server, the benchmarks and the models are imported inside the commands), so building the parser
stays fast."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from . import bench, demo, memories, moving, service, settings
from .options import _common, _Formatter, _Parser

#: every command's declaration, in the order of the command list (memstack --help, docs/cli.md)
COMMANDS: tuple[Callable[[Any], None], ...] = (
    memories.declare_add,
    settings.declare_init,
    settings.declare_config,
    memories.declare_context,
    memories.declare_threads,
    memories.declare_history,
    memories.declare_forget,
    settings.declare_retention,
    moving.declare_export,
    moving.declare_import,
    moving.declare_copy,
    moving.declare_verify,
    service.declare_worker,
    memories.declare_records,
    memories.declare_search,
    settings.declare_reindex,
    bench.declare_bench,
    service.declare_serve,
    service.declare_ui,
    service.declare_chat,
    service.declare_mcp,
    moving.declare_backup,
    demo.declare_demo,
)


def _version() -> str:
    """The installed distribution's version (what pip shows), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memstack")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


DESCRIPTION = (
    "Memory for LLM chat apps and agents: every user's conversations kept, and a context for the next model call under a token budget."
)

EPILOG = """The store comes from --db URL, else --home DIR (a SQLite file inside), else $MEMSTACK_HOME, else the user
data directory. Every command takes --home, --db, --tenant, --vectors (else $MEMSTACK_VECTORS) and --json,
before or after the command (memstack --home ./h import f.jsonl). Usage errors exit 2 with one line;
memstack alone lists the commands (exit 2).

Times (--at, the timestamp of imported records) carry a UTC offset: 2026-11-02T20:05:00+08:00, or
2026-11-02T12:05:00Z for UTC. One without (2026-11-02T20:05:00, a bare date) is refused, exit 2, naming
the form with an offset (an import names its line), never taken as UTC: a clock time without a zone
is a different instant in every zone (the library raises InvalidInput, the REST API answers 422). One
outside the years 1900 to 9000 in UTC is refused the same way.

Docs: docs/cli.md (every command and option), docs/index.md (where to start)."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memstack", description=DESCRIPTION, epilog=EPILOG, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")  # none: main prints the commands
    for declare in COMMANDS:
        declare(sub)
    # the common options, after each command's own (bench's subcommands: bench.declare_bench)
    for name, p in sub.choices.items():
        if name != "bench":
            _common(p)
    return parser
