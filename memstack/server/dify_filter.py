"""The metadata of a memory as Dify sees it, and Dify's ``metadata_condition`` over it: which
records a condition keeps, and the part of it memstack's search applies itself. Pure functions.

A record's metadata (``record_metadata``), and the comparison operators each field takes:

    id, thread_id, kind, category, lang   text     contains, not contains, start with, end with,
                                                   is, is not, in, not in, empty, not empty
    timestamp (ISO 8601)                  text     the same, and before, after
    time (Unix seconds), round            number   =, ≠, >, <, ≥, ≤, empty, not empty
                                                   (time also before, after)
    roles, source_ids                     list     contains, not contains (an item), in, not in
                                                   (any item among the values), empty, not empty

``before`` and ``after`` take Unix seconds or an ISO 8601 date or time (UTC when it names no
offset). ``in`` and ``not in`` take a list, or one string of comma-separated values. "null" and
"not null" (Dify's older documentation) are "empty" and "not empty"; "!=", ">=" and "<=" are
"≠", "≥" and "≤". A negative operator keeps exactly what its positive one leaves out, records
without the field included ("category is not 工作" keeps a record with no category). Any other
field, operator, or a value of the wrong kind, is refused with InvalidInput naming the condition
(``metadata_condition.conditions[0].comparison_operator``): a filter that silently matched
nothing would read as an empty memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..errors import InvalidInput
from ..types import Hit, SearchFilter, parse_time

TEXT = ("contains", "not contains", "start with", "end with", "is", "is not", "in", "not in", "empty", "not empty")
NUMBER = ("=", "≠", ">", "<", "≥", "≤", "empty", "not empty")
LIST = ("contains", "not contains", "in", "not in", "empty", "not empty")
TIME = ("before", "after")

#: each field of a record's metadata and the operators it takes
FIELDS: Mapping[str, tuple[str, ...]] = {
    "id": TEXT,
    "thread_id": TEXT,
    "kind": TEXT,
    "category": TEXT,
    "lang": TEXT,
    "timestamp": TEXT + TIME,
    "time": NUMBER + TIME,
    "round": NUMBER,
    "roles": LIST,
    "source_ids": LIST,
}
ALIASES = {"null": "empty", "not null": "not empty", "!=": "≠", ">=": "≥", "<=": "≤"}
_NEGATIVE = {"not contains": "contains", "is not": "is", "not in": "in", "not empty": "empty", "≠": "="}


def record_metadata(hit: Hit) -> dict[str, Any]:
    """The metadata of a Dify record for a search hit: where and when it was said, and what it is."""
    u = hit.unit
    out: dict[str, Any] = {
        "id": u.id,
        "thread_id": u.scope.thread_id,
        "timestamp": u.timestamp.isoformat(),
        "time": int(u.timestamp.timestamp()),
        "kind": u.kind,
        "roles": [str(r) for r in u.metadata.get("roles") or []],
        "source_ids": list(u.source_ids),
    }
    if u.round is not None:
        out["round"] = u.round
    if u.category:
        out["category"] = u.category
    if u.metadata.get("lang"):
        out["lang"] = str(u.metadata["lang"])
    return out


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition, checked: a field, a canonical operator, and its value in the field's kind."""

    name: str
    operator: str
    value: Any = None

    def holds(self, metadata: Mapping[str, Any]) -> bool:
        positive = _NEGATIVE.get(self.operator)
        if positive is not None:
            return not Condition(self.name, positive, self.value).holds(metadata)
        have = metadata.get(self.name)
        if self.operator == "empty":
            return have is None or have == "" or have == []
        if have is None:
            return False
        if self.operator in TIME:
            seconds = have if isinstance(have, (int, float)) else parse_time(str(have), field_name=self.name).timestamp()
            return seconds < self.value if self.operator == "before" else seconds > self.value
        if isinstance(have, list):
            return self.value in have if self.operator == "contains" else any(item in self.value for item in have)
        if self.operator in ("=", ">", "<", "≥", "≤"):
            return _compare(float(have), self.operator, self.value)
        text = str(have)
        return {
            "contains": lambda: self.value in text,
            "start with": lambda: text.startswith(self.value),
            "end with": lambda: text.endswith(self.value),
            "is": lambda: text == self.value,
            "in": lambda: text in self.value,
        }[self.operator]()


def _compare(have: float, op: str, want: float) -> bool:
    return {"=": have == want, ">": have > want, "<": have < want, "≥": have >= want, "≤": have <= want}[op]


@dataclass(frozen=True, slots=True)
class MetadataFilter:
    """Conditions joined by ``and`` or ``or``; no conditions keep every record."""

    conditions: tuple[Condition, ...] = ()
    logical_operator: str = "and"

    def keeps(self, metadata: Mapping[str, Any]) -> bool:
        if not self.conditions:
            return True
        results = (c.holds(metadata) for c in self.conditions)
        return all(results) if self.logical_operator == "and" else any(results)

    def search_filter(self) -> SearchFilter | None:
        """What memstack's search can apply itself, a superset of what the conditions keep (they
        are applied to the hits after it): the threads, kinds and categories a single ``is`` or
        ``in`` names, and the time range of ``after`` and ``before``; None when nothing (``or``)."""
        if not self.conditions or (self.logical_operator == "or" and len(self.conditions) > 1):
            return None
        named: dict[str, list[tuple[str, ...]]] = {}
        since: datetime | None = None
        until: datetime | None = None
        for c in self.conditions:
            if c.name in ("thread_id", "kind", "category") and c.operator in ("is", "in"):
                named.setdefault(c.name, []).append((c.value,) if c.operator == "is" else tuple(c.value))
            elif c.operator in TIME:
                at = datetime.fromtimestamp(c.value, tz=timezone.utc)
                if c.operator == "after":
                    since = at if since is None else max(since, at)
                else:
                    until = at if until is None else min(until, at)
        one = {name: values[0] for name, values in named.items() if len(values) == 1 and values[0]}
        if not one and since is None and until is None:
            return None
        return SearchFilter(
            thread_ids=one.get("thread_id", ()), kinds=one.get("kind", ()), categories=one.get("category", ()), since=since, until=until
        )


def parse_filter(logical_operator: str | None, conditions: Sequence[Mapping[str, Any]] | None) -> MetadataFilter:
    """A MetadataFilter from Dify's ``metadata_condition`` fields; InvalidInput naming the field."""
    operator = (logical_operator or "and").strip().lower()
    if operator not in ("and", "or"):
        raise InvalidInput(f"logical_operator must be 'and' or 'or', not {logical_operator!r}", field="metadata_condition.logical_operator")
    return MetadataFilter(tuple(_condition(c, f"metadata_condition.conditions[{i}]") for i, c in enumerate(conditions or ())), operator)


def _condition(raw: Mapping[str, Any], at: str) -> Condition:
    names = raw.get("name")
    if isinstance(names, list):  # Dify's older documentation: a list of names
        if len(names) != 1:
            raise InvalidInput("name must be one metadata field", field=f"{at}.name")
        names = names[0]
    name = str(names)
    if name not in FIELDS:
        raise InvalidInput(f"records have no metadata {name!r}; their fields: {', '.join(FIELDS)}", field=f"{at}.name")
    given = str(raw.get("comparison_operator") or "").strip()
    op = ALIASES.get(given, given)
    if op not in FIELDS[name]:
        raise InvalidInput(
            f"comparison operator {given!r} does not apply to {name!r}; it takes: {', '.join(FIELDS[name])}",
            field=f"{at}.comparison_operator",
        )
    return Condition(name, op, _value(name, op, raw.get("value"), f"{at}.value"))


def _value(name: str, op: str, value: Any, at: str) -> Any:
    """The value in the kind the operator compares with: text, a list of texts, a number, Unix seconds."""
    if op in ("empty", "not empty"):
        return None
    if value is None or value == "" or value == []:
        raise InvalidInput(f"{op!r} needs a value", field=at)
    if op in TIME:
        return _seconds(value, at)
    if op in NUMBER:
        return _number(value, at)
    if op in ("in", "not in"):
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
        values = tuple(str(v).strip() for v in items if str(v).strip())
        if not values:
            raise InvalidInput(f"{op!r} needs at least one value", field=at)
        return values
    if isinstance(value, (list, bool)):
        raise InvalidInput(f"{op!r} compares with one value, not {type(value).__name__}", field=at)
    return str(value)


def _number(value: Any, at: str) -> float:
    if isinstance(value, (bool, list)):
        raise InvalidInput(f"expected a number, not {value!r}", field=at)
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"expected a number, not {value!r}", field=at) from exc
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidInput(f"expected a finite number, not {value!r}", field=at)
    return number


def _seconds(value: Any, at: str) -> float:
    """Unix seconds from a number, a numeric string, or an ISO 8601 date or time (UTC if naive)."""
    if isinstance(value, str) and not _is_number(value):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            seconds = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
        except (ValueError, OverflowError) as exc:
            raise InvalidInput(f"expected Unix seconds or an ISO 8601 date or time, not {value!r}", field=at) from exc
    else:
        seconds = _number(value, at)
    if not -62_135_596_800 <= seconds <= 253_402_300_799:  # years 1 to 9999, UTC
        raise InvalidInput(f"{value!r} is not a time of the years 1 to 9999 (UTC)", field=at)
    return seconds


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
