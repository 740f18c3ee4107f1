"""Retention: how long a tenant's memory is kept, as a policy in its memory profile.

``memstack init --retain messages=180d,audit=365d,usage=90d`` keeps messages for 180 days after
their timestamp, audit events for 365 days after they were recorded, model calls for 90 days; a
kind not named (or named ``keep``) is kept for ever. The model-made memories that stood only on
expired messages (summaries, entities, relations, state keys, retrieval units and their vectors)
go with them, unless ``derived=keep``. Durations are a whole number and a unit: ``h`` hours,
``d`` days, ``w`` weeks (``12h``, ``30d``, ``52w``).

The policy is a value (``Retention``) kept in the profile's JSON (``to_dict``/``from_dict``); a
profile written before retention existed has none, which reads as keeping everything. The pass
that applies it is ``memstack.expiry``; what a pass deletes is ``types.Expiry``, the cutoffs of a
policy at one instant (``Retention.expiry``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidInput
from .types import Expiry

#: the kinds a policy limits, as ``--retain`` and the profile name them
KINDS: tuple[str, ...] = ("messages", "audit", "usage")
#: seconds per duration unit, largest first (a duration is written in the largest that divides it)
UNITS: dict[str, int] = {"w": 7 * 86400, "d": 86400, "h": 3600}
#: what ``derived=`` takes: delete the memories made from expired messages only (the default), or keep them
DERIVED: tuple[str, ...] = ("delete", "keep")
_DURATION = re.compile(r"(\d{1,6})([hdw])")


def parse_duration(text: str, *, field: str = "retain") -> timedelta:
    """``30d``, ``12h``, ``52w`` as a timedelta (at least one hour); InvalidInput naming ``text`` otherwise."""
    match = _DURATION.fullmatch(text.strip().lower()) if isinstance(text, str) else None
    if match is None or int(match.group(1)) == 0:
        raise InvalidInput(f"{field}: {text!r} is not a duration; give a whole number and h, d or w (12h, 30d, 52w), or keep", field=field)
    return timedelta(seconds=int(match.group(1)) * UNITS[match.group(2)])


def format_duration(value: timedelta) -> str:
    """A duration as ``parse_duration`` reads it, in the largest unit that divides it: 52w, 180d, 36h."""
    seconds = int(value.total_seconds())
    unit = next(u for u, size in UNITS.items() if seconds % size == 0)
    return f"{seconds // UNITS[unit]}{unit}"


@dataclass(frozen=True, slots=True)
class Retention:
    """A tenant's retention policy: how long each kind is kept (None: for ever) and whether the
    memories made from expired messages only are deleted with them (``derived``)."""

    messages: timedelta | None = None
    audit: timedelta | None = None
    usage: timedelta | None = None
    derived: bool = True

    @classmethod
    def parse(cls, text: str) -> Retention:
        """``messages=180d,audit=365d,usage=90d,derived=keep`` (any of them, any order; ``KIND=keep``
        keeps that kind); InvalidInput naming the part that is wrong."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("retain: give KIND=DURATION pairs, e.g. messages=180d,audit=365d,usage=90d", field="retain")
        given: dict[str, str] = {}
        for part in text.split(","):
            name, sep, value = (s.strip() for s in part.partition("="))
            if not sep or not name or not value:
                raise InvalidInput(f"retain: {part.strip()!r} is not KIND=DURATION (e.g. messages=180d)", field="retain")
            if name not in (*KINDS, "derived"):
                raise InvalidInput(f"retain: unknown kind {name!r}; expected {', '.join(KINDS)} or derived", field="retain")
            if name in given:
                raise InvalidInput(f"retain: {name} is given twice", field="retain")
            given[name] = value.lower()
        return cls.from_dict(given, field="retain")

    def to_dict(self) -> dict[str, str]:
        """The policy as the profile keeps it: ``{"messages": "180d", ..., "derived": "delete"}``."""
        out = {k: format_duration(v) for k in KINDS if (v := getattr(self, k)) is not None}
        return {**out, "derived": DERIVED[0] if self.derived else DERIVED[1]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *, field: str = "retention") -> Retention:
        """The policy of a profile's ``retention`` (None or {}: keep everything); InvalidInput when malformed."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InvalidInput(f"{field}: a retention policy is an object of KIND: DURATION", field=field)
        durations = {
            kind: None if data.get(kind) in (None, "keep") else parse_duration(data[kind], field=f"{field}.{kind}") for kind in KINDS
        }
        derived = data.get("derived", DERIVED[0])
        if derived not in DERIVED:
            raise InvalidInput(f"{field}: derived={derived!r}; expected {' or '.join(DERIVED)}", field=f"{field}.derived")
        return cls(**durations, derived=derived == DERIVED[0])

    @property
    def keeps_everything(self) -> bool:
        """True when nothing ever expires (no kind has a duration)."""
        return all(getattr(self, k) is None for k in KINDS)

    def expiry(self, now: datetime) -> Expiry:
        """What a pass at ``now`` deletes: each limited kind's rows older than ``now`` less its duration."""
        return Expiry(
            **{k: None if (v := getattr(self, k)) is None else now - v for k in KINDS},
            derived=self.derived,
        )

    def describe(self) -> str:
        """One line: "messages 180d, audit 365d, usage 90d; derived memories deleted" or "keep everything"."""
        if self.keeps_everything:
            return "keep everything"
        kinds = ", ".join(f"{k} {format_duration(v)}" if (v := getattr(self, k)) else f"{k} kept" for k in KINDS)
        return f"{kinds}; derived memories {'deleted' if self.derived else 'kept'}"
