"""Cost ceilings as values: a token limit per period (``Limit``) and a tenant's budget (``Budget``), pure.

    Limit.parse("tokens=2000000/day")        2,000,000 tokens a UTC day for the tenant's layers
    Limit.parse("tokens=50000/day/user")     50,000 tokens a UTC day for each user
    Budget(layers=(...), answers=Limit(...)) kept in the memory profile (``profile.Profile.budget``)

Periods are UTC calendar periods (hour, day, month): a period starts at its first instant and the
next one resets the count. ``memstack.ceiling`` enforces them; this module only names and parses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import InvalidInput

PERIODS: tuple[str, ...] = ("hour", "day", "month")


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``tokens`` (prompt + completion) per UTC ``period``, for the whole tenant or, with
    ``per_user``, for each of its users."""

    tokens: int
    period: str = "day"
    per_user: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 1:
            raise InvalidInput(f"a budget's tokens must be a positive whole number, got {self.tokens!r}", field="tokens")
        if self.period not in PERIODS:
            raise InvalidInput(f"unknown budget period {self.period!r}; known: {', '.join(PERIODS)}", field="period")

    @classmethod
    def parse(cls, text: str, *, field: str = "budget") -> Limit:
        """``tokens=N/PERIOD`` or ``tokens=N/PERIOD/user``; N may use ``_`` or ``,`` between digits.
        InvalidInput naming the part that is wrong."""
        spec = text.strip()
        name, eq, rest = spec.partition("=")
        if not eq or name.strip() != "tokens":
            raise InvalidInput(
                f"{field} {text!r}: expected tokens=N/PERIOD (e.g. tokens=2000000/day), the part before '=' must be 'tokens'", field=field
            )
        parts = [p.strip() for p in rest.split("/")]
        if len(parts) not in (2, 3):
            raise InvalidInput(f"{field} {text!r}: expected tokens=N/PERIOD or tokens=N/PERIOD/user", field=field)
        number = parts[0].replace("_", "").replace(",", "")
        if not number.isdigit() or int(number) < 1:
            raise InvalidInput(f"{field} {text!r}: the token count {parts[0]!r} is not a positive whole number", field=field)
        if parts[1] not in PERIODS:
            raise InvalidInput(f"{field} {text!r}: the period {parts[1]!r} is not one of {', '.join(PERIODS)}", field=field)
        if len(parts) == 3 and parts[2] != "user":
            raise InvalidInput(f"{field} {text!r}: the last part {parts[2]!r} must be 'user' (a limit for each user)", field=field)
        return cls(int(number), parts[1], len(parts) == 3)

    def spec(self) -> str:
        """The text ``parse`` reads back: ``tokens=2000000/day``."""
        return f"tokens={self.tokens}/{self.period}" + ("/user" if self.per_user else "")

    def describe(self) -> str:
        """``2,000,000 tokens/day`` (``/user`` for a per-user limit)."""
        return f"{self.tokens:,} tokens/{self.period}" + ("/user" if self.per_user else "")

    def window(self, at: datetime) -> tuple[datetime, datetime]:
        """The UTC period holding ``at``: [start, end)."""
        return period_window(self.period, at)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "period": self.period, "per_user": self.per_user}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limit:
        return cls(data.get("tokens"), data.get("period", "day"), bool(data.get("per_user", False)))  # type: ignore[arg-type]


def period_window(period: str, at: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the UTC hour, day or month holding ``at`` (an aware datetime)."""
    t = at.astimezone(timezone.utc)
    if period == "hour":
        start = t.replace(minute=0, second=0, microsecond=0)
        return start, start + timedelta(hours=1)
    if period == "day":
        start = t.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    if period == "month":
        start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return start, end
    raise InvalidInput(f"unknown budget period {period!r}; known: {', '.join(PERIODS)}", field="period")


@dataclass(frozen=True, slots=True)
class Budget:
    """A tenant's cost ceilings: ``layers`` (at most one tenant-wide and one per-user limit) bound
    what the model-backed layers' jobs spend; ``answers`` (per user) what the proxy's answering
    spends. Empty: unlimited (every profile written before budgets existed reads so)."""

    layers: tuple[Limit, ...] = ()
    answers: Limit | None = None

    def __post_init__(self) -> None:
        if sum(not x.per_user for x in self.layers) > 1 or sum(x.per_user for x in self.layers) > 1:
            raise InvalidInput("a budget has at most one limit for the tenant and one per user", field="budget")

    @classmethod
    def parse(cls, layers: Iterable[str] = (), answers: str | None = None) -> Budget:
        """From ``--budget`` values (each may hold several limits split by commas) and ``--answer-budget``."""
        limits = tuple(Limit.parse(p, field="--budget") for value in layers for p in re.split(r",\s*(?=tokens\s*=)", value) if p.strip())
        answer = None
        if answers:
            answer = Limit.parse(answers, field="--answer-budget")
            answer = Limit(answer.tokens, answer.period, True)  # answering is limited per user
        return cls(limits, answer)

    def over(self, base: Budget, *, layers: bool, answers: bool) -> Budget:
        """``base`` with this budget's layer limits (if ``layers`` were given) and answer limit (if
        ``answers``): ``init --budget`` keeps the answer budget, ``init --answer-budget`` the layers'."""
        return Budget(self.layers if layers else base.layers, self.answers if answers else base.answers)

    @property
    def unlimited(self) -> bool:
        return not self.layers and self.answers is None

    def tenant(self) -> Limit | None:
        return next((x for x in self.layers if not x.per_user), None)

    def user(self) -> Limit | None:
        return next((x for x in self.layers if x.per_user), None)

    def describe(self) -> str:
        """``layers 2,000,000 tokens/day; answers 20,000 tokens/day/user`` (``unlimited``)."""
        parts = []
        if self.layers:
            parts.append("layers " + ", ".join(x.describe() for x in self.layers))
        if self.answers:
            parts.append("answers " + self.answers.describe())
        return "; ".join(parts) or "unlimited"

    def to_dict(self) -> dict[str, Any]:
        return {"layers": [x.to_dict() for x in self.layers], "answers": self.answers.to_dict() if self.answers else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Budget:
        if not data:
            return cls()
        layers = data.get("layers") or []
        answers = data.get("answers")
        if (
            not isinstance(layers, list)
            or not all(isinstance(x, Mapping) for x in layers)
            or not (answers is None or isinstance(answers, Mapping))
        ):
            raise InvalidInput("the profile's budget is malformed; rewrite it with `memstack init --budget ...`", field="budget")
        return cls(tuple(Limit.from_dict(x) for x in layers), Limit.from_dict(answers) if answers else None)
