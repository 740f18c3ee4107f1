"""A thread's message log: one JSON line per message with its seq; a torn last line (a killed
writer's) is left out on read and cut off by the next append."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ...errors import SchemaError
from ...types import Message, ThreadInfo
from .files import dump_json, read_bytes, read_document, remove_file, write_atomically
from .jobs import JOBS_FILE
from .names import decode_name, decode_optional


def message_line(message: Message) -> bytes:
    return dump_json({"seq": message.seq, **message.to_dict()}) + b"\n"


def read_log(path: Path) -> tuple[list[Message], int]:
    """A thread file's messages and the byte length of its complete lines (a torn last line is left out)."""
    data = read_bytes(path)
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")[:-1]
    return [parse_line(path, number, line) for number, line in enumerate(lines, 1) if line.strip()], complete


def expire_log(path: Path, before: datetime) -> int:
    """Drop a thread file's messages dated before ``before``: the file is replaced at once by its
    other lines (removed when none is left); returns the messages dropped."""
    messages, _ = read_log(path)
    kept = [m for m in messages if m.timestamp >= before]
    if len(kept) == len(messages):
        return 0
    if kept:
        write_atomically(path, b"".join(message_line(m) for m in kept))
    else:
        remove_file(path)
    return len(messages) - len(kept)


def parse_line(path: Path, number: int, line: bytes) -> Message:
    try:
        record = json.loads(line)
        return Message.from_dict(record, seq=int(record["seq"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"{path}:{number}: not a stored message: {exc}") from exc


def unseen(messages: Sequence[Message], seen: set[str]) -> list[Message]:
    """The messages whose ids are not in ``seen`` (nor earlier in ``messages``), in order."""
    fresh = []
    for m in messages:
        if m.id not in seen:
            seen.add(m.id)
            fresh.append(m)
    return fresh


def thread_infos(agent_dir: Path) -> list[ThreadInfo]:
    """The non-empty threads stored under one agent directory."""
    agent_id = decode_optional(agent_dir.name)
    infos = []
    for path in sorted((agent_dir / "threads").glob("*.jsonl")):
        messages, _ = read_log(path)
        if messages:
            stamps = [m.timestamp for m in messages]
            infos.append(ThreadInfo(decode_name(path.name.removesuffix(".jsonl")), agent_id, len(messages), min(stamps), max(stamps)))
    return infos


def count_records(user_dir: Path) -> dict[str, int]:
    """Messages, and the other rows (state documents, checkpoints, job rows), under a user's
    directory, as a deletion note counts them."""
    messages = sum(len(read_log(path)[0]) for path in user_dir.glob("*/threads/*.jsonl"))
    states = sum(1 for _ in user_dir.glob("*/state/*/*.json"))
    checkpoints = sum(len(read_document(path) or []) for path in user_dir.glob("*/checkpoints/*.json"))
    return {"messages": messages, "other": states + checkpoints + len(read_document(user_dir / JOBS_FILE) or [])}
