"""The commands that move memory between stores: ``export`` and ``import`` (a user's messages and
saved memories as JSON lines; with ``--all``, or an export that starts with a header, everything
of the user in the versioned format of ``memstack.transfer``), ``copy`` and ``verify`` (a whole
store, every tenant unless --tenant or --user names one, a copy ending with a verify that exits 1
on any difference), and ``backup`` (the store as it is at one instant). A bad import line is
named by its line in the file; nothing is read as UTC without an offset."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..backends import open_store
from ..errors import InvalidInput, MemstackError, NotFound, UsageError
from ..memory import Memory
from ..saved import is_record as is_saved_record
from ..views import plural
from .common import _emit, _memory, _require_user, _tenant_given
from .options import _command


def declare_export(sub: Any) -> None:
    """``memstack export``: a user's messages and saved memories, or ``--all``."""
    p = _command(
        sub,
        "export",
        "write a user's messages and saved memories as JSON lines to stdout",
        "docs/library.md",
        'The messages, then the saved memories (records with "type": "note"); `memstack import` stores them again, in this store or another. A user the tenant does not have: `no such user \'x\'`, exit 1.',
    )
    p.add_argument("--user", help="the user's id (with --all: default every user of the tenant)")
    p.add_argument("--all", action="store_true", help="everything the store holds of the user, in the versioned format of docs/moving.md")
    p.set_defaults(run=cmd_export)


def cmd_export(args: argparse.Namespace) -> None:
    if args.all:
        return _export_all(args)
    if not args.user:
        raise UsageError("the following arguments are required: --user (or --all)")
    with _memory(args) as mem:
        _require_user(mem, args)
        for rec in mem.export(user_id=args.user):
            print(json.dumps(rec, ensure_ascii=False))


def _export_all(args: argparse.Namespace) -> None:
    from ..transfer import write_export
    from ..transfer.source import users

    store, index = _store_and_index(args)
    try:
        chosen = [args.user] if args.user else users(store, args.tenant)
        if args.user and args.user not in users(store, args.tenant):
            raise NotFound(f"no such user {args.user!r}")
        write_export(store, args.tenant, chosen, sys.stdout, index=index)
    finally:
        store.close()


def declare_import(sub: Any) -> None:
    """``memstack import``: either export's form, told by its first line."""
    p = _command(
        sub,
        "import",
        "store messages and saved memories from a JSON-lines export (- for stdin)",
        "docs/library.md",
        "Each message is stored once (by id), and the command says how many were already stored: `imported 0 of 6 messages (6 already stored)`; --json gives imported, records and already_stored. A timestamp without a UTC offset is refused, naming its line.",
    )
    p.add_argument("file", help="the export to read, or - for stdin")
    p.set_defaults(run=cmd_import)


def cmd_import(args: argparse.Namespace) -> None:
    raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{args.file} is not valid UTF-8 (byte {exc.start})") from exc
    records, lines = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{args.file}:{i}: not JSON: {exc.msg}") from exc
            lines.append(i)
    from ..transfer.portable import is_header

    if records and is_header(records[0]):
        return _import_all(args, records, lines)
    with _memory(args) as mem:
        n = _import_lines(mem, records, lines, args.file)
    stored = len(records) - n
    data = {"imported": n, "records": len(records), "already_stored": stored}
    noun = "record" if any(isinstance(r, dict) and is_saved_record(r) for r in records) else "message"  # saved memories too
    _emit(args, data, lambda: f"imported {n} of {plural(len(records), noun)}" + (f" ({stored} already stored)" if stored else ""))


def _import_lines(mem: Memory, records: list[Any], lines: list[int], file: str) -> int:
    """``Memory.import_``, with a bad record named by its line in the file (blank lines make the
    record's number and its line differ). Every record that is not stored was already stored:
    import_ skips a message whose id the thread holds and refuses anything else before writing."""
    seen, done = 0, False

    def counted() -> Iterator[Any]:
        nonlocal seen, done
        for rec in records:
            seen += 1
            yield rec
        done = True

    try:
        return mem.import_(counted())
    except InvalidInput as exc:
        if done or not seen:
            raise
        reason = str(exc).removeprefix(f"record {seen}: ")
        raise InvalidInput(f"{file}:{lines[seen - 1]}: {reason}", field=exc.field) from exc


def _import_all(args: argparse.Namespace, records: list[Any], lines: list[int]) -> None:
    from ..transfer import read_export

    store, index = _store_and_index(args)
    try:
        stored = read_export(zip(lines, records, strict=True), store, index=index)
    finally:
        store.close()
    total = sum(stored.values())
    _emit(
        args,
        {"imported": stored},
        lambda: f"imported {plural(total, 'item')}" + (" (" + ", ".join(f"{n} {k}" for k, n in stored.items()) + ")" if stored else ""),
    )


def _store_and_index(args: argparse.Namespace) -> tuple[Any, Any]:
    """The store itself (no Memory: opening one would write a default profile) and its vector index."""
    from ..backends import open_vectors

    store = open_store(args.db, home=args.home)
    return store, open_vectors(args.vectors) or getattr(store, "vectors", None)


# ---- moving a whole store (memstack.transfer) ----


def declare_copy(sub: Any) -> None:
    """``memstack copy SRC DST``."""
    p = _command(
        sub,
        "copy",
        "copy a whole store (every tenant, or one) to another store, then verify it",
        "docs/moving.md",
        "Every tenant of the source (or only --tenant's, or its --user ones), each user's messages with their ids and times, checkpoints, each layer's place in the write queue, every model-made record with its history, the audit trail, usage, retrieval units and saved memories, their vectors (--vectors: the source's index outside the store; --to-vectors: the destination's), LangGraph's own tables, each tenant's profile, and its deletion notes with the key their hashes were made under. Refuses a destination that holds users of a copied tenant (before copying anything) unless --into-existing (then no copied user may exist there), and one that holds deletion notes under a key of its own unless --no-deletions. Killed, it is finished by running it again. Ends with `memstack verify`: exit 1 naming each user and kind that differ.",
    )
    p.add_argument("source", metavar="SRC", help="the store to read: sqlite:///FILE, postgresql://..., jsonl:///DIR")
    p.add_argument("destination", metavar="DST", help="the store to write")
    p.add_argument("--user", action="append", help="only this user (repeat for more; default: every user of the tenant)")
    p.add_argument("--into-existing", action="store_true", help="add to a destination that holds other users of the tenant")
    p.add_argument(
        "--to-vectors",
        metavar="URL",
        help="the destination's vector index outside the store: milvus://HOST:PORT, milvus:///ABS/FILE.db, chroma://HOST:PORT, chroma:///ABS/DIR",
    )
    p.add_argument(
        "--reembed", action="store_true", help="copy no vectors (a new embedder): run `memstack reindex` on the destination afterwards"
    )
    p.add_argument("--batch", type=int, default=500, help="items per write (default: %(default)s)")
    p.add_argument(
        "--no-deletions", action="store_true", help="leave the deletion notes in the source (a destination with notes of its own)"
    )
    p.set_defaults(run=cmd_copy)


def cmd_copy(args: argparse.Namespace) -> None:
    """Every tenant of the source, unless --tenant or --user names where to look."""
    from collections import Counter

    from ..transfer import copy_tenants
    from ..transfer.progress import Progress

    if args.batch < 1:
        raise UsageError("--batch must be at least 1")
    src, dst, src_index, dst_index = _two_stores(args)
    try:
        progress = Progress(users=len(args.user) if args.user else 0)
        reports = copy_tenants(
            src,
            dst,
            tenants=[args.tenant] if _tenant_given(args) or args.user else None,
            users=args.user,
            src_index=None if args.reembed else src_index,
            dst_index=None if args.reembed else dst_index,
            into_existing=args.into_existing,
            batch=args.batch,
            progress=progress,
            deletions=not args.no_deletions,
        )
        progress.done()
    finally:
        src.close()
        dst.close()
    read: Counter[str] = Counter()
    for report in reports.values():
        read.update(report.read)
    said = ", ".join(f"{n} {kind}" for kind, n in read.items())
    users = sum(r.users for r in reports.values())
    where = f" of {plural(len(reports), 'tenant')}" if len(reports) != 1 else ""
    resumed = " (resumed)" if any(r.resumed for r in reports.values()) else ""
    _differences(
        args,
        [f"tenant {t!r}: {d}" if len(reports) > 1 else d for t, r in reports.items() for d in r.differences],
        f"copied {plural(users, 'user')}{where} ({said or 'nothing'}){resumed}; verify: clean",
    )


def declare_verify(sub: Any) -> None:
    """``memstack verify SRC DST``."""
    p = _command(
        sub,
        "verify",
        "compare two stores: per user and kind, counts and a content digest",
        "docs/moving.md",
        "Exit 0 when every user of every tenant (or of --tenant) holds the same messages, checkpoints, job cursors, state documents, records, audit events, usage, units, vectors and LangGraph rows in both, and each tenant the same profile and deletion notes; else exit 1, one line per user and kind that differ.",
    )
    p.add_argument("source", metavar="SRC", help="one store")
    p.add_argument("destination", metavar="DST", help="the other")
    p.add_argument("--user", action="append", help="only this user (repeat for more)")
    p.add_argument("--to-vectors", metavar="URL", help="the destination's vector index outside the store")
    p.add_argument("--no-vectors", action="store_true", help="leave vectors out (after a copy with --reembed)")
    p.add_argument("--no-deletions", action="store_true", help="leave deletion notes out (after a copy with --no-deletions)")
    p.set_defaults(run=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> None:
    """Every tenant of either store, unless --tenant or --user names where to look."""
    from ..transfer.copying import verify, verify_tenants

    src, dst, src_index, dst_index = _two_stores(args)
    indexes: dict[str, Any] = {"src_index": None if args.no_vectors else src_index, "dst_index": None if args.no_vectors else dst_index}
    indexes["deletions"] = not args.no_deletions
    try:
        found: list[Any]
        if _tenant_given(args) or args.user:
            found = verify(src, dst, tenant=args.tenant, users=args.user, **indexes)
        else:
            found = [f"tenant {t!r}: {d}" for t, d in verify_tenants(src, dst, **indexes)]
    finally:
        src.close()
        dst.close()
    _differences(args, found, "verify: clean")


def _two_stores(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """The source and destination stores and their vector indexes (None: without one)."""
    from ..backends import open_vectors

    _existing(args.source)
    src, dst = open_store(args.source), open_store(args.destination)
    src_index = open_vectors(args.vectors) or getattr(src, "vectors", None)
    dst_index = open_vectors(args.to_vectors) or getattr(dst, "vectors", None)
    return src, dst, src_index, dst_index


def _existing(url: str) -> None:
    """NotFound for a source URL that names a SQLite file or JSON-lines directory that is not there:
    opening it would create an empty store and report every user as missing (a mistyped path or an
    unset $MEMSTACK_HOME)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("sqlite", "jsonl") and rest not in ("", ":memory:", "/:memory:") and not Path(rest).expanduser().exists():
        raise NotFound(f"no store at {rest}: the source must exist (check the path, or $MEMSTACK_HOME)")


def _differences(args: argparse.Namespace, differences: Sequence[Any], clean: str) -> None:
    if differences:
        raise MemstackError("the stores differ:\n" + "\n".join(f"  {d}" for d in differences))
    _emit(args, {"differences": []}, lambda: clean)


def declare_backup(sub: Any) -> None:
    """``memstack backup FILE``."""
    p = _command(
        sub,
        "backup",
        "copy the store to FILE as it is at one instant, while servers and workers keep writing",
        "docs/backups.md",
        "SQLite: SQLite's online backup API, the copy checked (integrity_check) and renamed into place; the store is not migrated. JSON lines: the directory copied under the store's lock. PostgreSQL is refused, naming the pg_dump line to run instead.",
    )
    p.add_argument("file", help="the backup: a new SQLite file (or directory, for a JSON lines store)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.set_defaults(run=cmd_backup)


def cmd_backup(args: argparse.Namespace) -> None:
    from ..backup import backup

    done = backup(args.db, args.file, home=args.home, overwrite=args.overwrite)
    _emit(
        args,
        {"kind": done.kind, "source": done.source, "backup": done.target, "bytes": done.bytes},
        lambda: f"backed up {done.source} to {done.target} ({done.bytes} bytes)",
    )
