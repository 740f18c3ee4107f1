"""What every command shares: the exit codes, the presets named in --help, the tenant no one
gave, opening Memory from the common options (--db, --home, --tenant, --vectors), ``--at`` as an
aware time, "no such user", and the output (``--json``: one JSON document; else the text, when
there is any). Parser and commands both import it; it imports neither."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..backends import open_store
from ..errors import NotFound
from ..memory import Memory
from ..presets import PRESETS
from ..types import in_range, parse_time

#: the scenario presets, named in --help (memstack.presets is data: importing it loads no layer)
PRESET_NAMES = tuple(PRESETS)
EXIT_USAGE = 2
EXIT_FAILURE = 1


class _DefaultTenant(str):
    """The --tenant no one gave ("default"): ``copy`` and ``verify`` then take every tenant."""


def _tenant_given(args: argparse.Namespace) -> bool:
    return not isinstance(args.tenant, _DefaultTenant)


def _memory(args: argparse.Namespace, **kwargs: Any) -> Memory:
    return Memory(
        open_store(args.db, home=args.home) if (args.db or args.home) else None, tenant=args.tenant, vectors=args.vectors, **kwargs
    )


def _at(args: argparse.Namespace) -> datetime | None:
    """``--at`` as an aware datetime: one without a UTC offset is refused (exit 2), never taken as
    UTC, so the command line, the library and the REST API (422) agree."""
    return in_range(parse_time(args.at, field_name="--at"), field_name="--at") if args.at else None


def _emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, ensure_ascii=False, default=str))
    else:
        out = text()
        if out:
            print(out)


def _require_user(mem: Memory, args: argparse.Namespace) -> None:
    """An unknown user is "no such user" (exit 1), as REST's 404, not an empty answer."""
    from .. import views

    if not views.known_user(mem.store, mem.scope(args.user)):
        raise NotFound(f"no such user {args.user!r} (tenant {args.tenant!r})", field="user_id")
