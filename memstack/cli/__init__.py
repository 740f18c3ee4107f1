"""The ``memstack`` command: a thin shell over Memory. Usage errors exit 2 with one line.

The store comes from ``--db URL``, else ``--home DIR`` (SQLite file inside), else MEMSTACK_HOME,
else the user's data directory. Every command takes ``--json`` and ``--tenant``; ``--vectors URL``
(else MEMSTACK_VECTORS) keeps the vectors outside the store, in Milvus (``milvus://host:19530``) or Chroma (``chroma://host:8000``).

Each command's help says in its first line what it does and ends naming the docs page that tells
the rest; docs/cli.md is generated from this parser (docs/gen_cli.py), so it cannot drift.

The package, one idea a module: ``main`` here (the errors to exit codes); ``parser`` the top
level and the order of the commands, ``options`` its building blocks, ``common`` what every
command shares; the commands by what they touch: ``memories`` (a user's memory), ``settings``
(the store's configuration and upkeep), ``moving`` (export, import, copy, verify, backup),
``service`` (worker, serve, ui, chat, mcp), ``bench`` and ``demo``. Each module declares its
commands' options next to what they do. ``main``, ``_parser``, ``PRESET_NAMES``, ``EXIT_USAGE``
and ``EXIT_FAILURE`` are kept importable from ``memstack.cli``, as before the split.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..errors import MemstackError, NotFound, UsageError
from .common import EXIT_FAILURE, EXIT_USAGE, PRESET_NAMES
from .parser import _parser

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "PRESET_NAMES", "_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `memstack`: what there is to run, not just an error
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        args.run(args)
    except NotFound as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except UsageError as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MemstackError as exc:
        print(f"memstack: failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:
        print(f"memstack: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, FileNotFoundError) else EXIT_FAILURE
    return 0
