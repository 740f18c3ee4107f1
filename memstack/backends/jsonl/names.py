"""Ids as file names: every tenant, user, agent and thread id is one safe file name on any OS."""

from __future__ import annotations

import string
from urllib.parse import unquote

from ...errors import InvalidInput

PLACEHOLDER = "_"  # the directory name standing for "no agent" or "no thread"
MAX_ENCODED_LENGTH = 255 - len(".jsonl")  # file systems allow 255 bytes per name
_PLAIN = frozenset(string.ascii_lowercase + string.digits + "-_~")
_WINDOWS_DEVICES = frozenset(["con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))])


def encode_name(name: str) -> str:
    """``name`` as one safe file name on any OS; ``decode_name`` reverses it.

    Every character but lowercase ASCII letters, digits, '-', '_' and '~' is percent-encoded
    (UTF-8), so an encoded name holds no separator or '.', and no two differ only by case (macOS
    and Windows fold case). The first character is encoded too where the name would start with '_'
    (kept for the store) or be a Windows device name (con, nul, com1...).
    """
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"a name must be a non-empty string, got {name!r}")
    try:
        encoded = "".join(c if c in _PLAIN else _percent(c) for c in name)
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name!r} is not valid Unicode") from exc
    if encoded.startswith(PLACEHOLDER) or encoded in _WINDOWS_DEVICES:
        encoded = _percent(name[0]) + encoded[1:]
    if len(encoded) > MAX_ENCODED_LENGTH:
        raise InvalidInput(f"{name[:40]!r}... is too long for a file name once encoded ({len(encoded)} > {MAX_ENCODED_LENGTH} characters)")
    return encoded


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def decode_name(encoded: str) -> str:
    return unquote(encoded, errors="strict")


def encode_optional(name: str | None) -> str:
    return PLACEHOLDER if name is None else encode_name(name)


def decode_optional(encoded: str) -> str | None:
    return None if encoded == PLACEHOLDER else decode_name(encoded)
