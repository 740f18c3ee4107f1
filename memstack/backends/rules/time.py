"""Instants as the SQL backends filter on them: whole microseconds since 1970-01-01 UTC."""

from __future__ import annotations

from datetime import datetime, timezone

from ...types import aware

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_US = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - EPOCH


def epoch_us(value: datetime) -> int:
    """Microseconds since 1970-01-01 UTC (exact, for time filters)."""
    return (value - EPOCH) // ONE_US


def from_us(value: int) -> datetime:
    """The instant ``value`` microseconds after 1970 UTC; one past what a datetime holds (stored
    before timestamps were kept to years 1900..9000, e.g. 9999-12-31T23:59:59-14:00) reads as the
    first or last datetime instead of failing every read of its user."""
    try:
        return EPOCH + value * ONE_US
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc) if value > 0 else datetime.min.replace(tzinfo=timezone.utc)


def utc(value: datetime, *, field_name: str) -> datetime:
    """An aware datetime in UTC (naive ones are InvalidInput)."""
    return aware(value, field_name=field_name).astimezone(timezone.utc)
