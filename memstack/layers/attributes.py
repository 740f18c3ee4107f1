"""An entity attribute's values over time, as the store holds them: the current values (one or
several that accumulate) and the past ones with the date each ended. A newly said value joins the
current ones, replaces those it supersedes (``supersede.replaced``), or is recorded as past when
the words say it ended; the stored shape keeps a flat ``value`` beside ``values``/``past``.
"""

from __future__ import annotations

from typing import Any

from ..llm.grounding import normalize
from .supersede import canonical, instant, kind, replaced_items, said_as_old, settle


def attribute_values(attribute: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """An attribute's current values and its past ones (each {"value", "source_ids", "valid_from"},
    past ones with "until"), from either shape the store holds (one value, or "values"/"past")."""
    if not attribute:
        return [], []
    if "values" in attribute:
        current = [dict(x) for x in attribute["values"]]
    else:
        current = [{k: attribute[k] for k in ("value", "source_ids", "valid_from") if k in attribute}] if attribute.get("value") else []
    return current, [dict(x) for x in attribute.get("past", [])]


#: past values kept per attribute (the record's history keeps every version)
PAST_KEPT = 5


def update_attribute(
    old: dict[str, Any] | None, predicate: str, new: dict[str, Any], sentence: str, lang: str, *, past: bool = False, cue: bool = False
) -> dict[str, Any]:
    """One attribute after a new value was said: accumulated beside the current ones, or superseding
    those it replaces (``supersede.replaced``; ``cue``: the predicate as written said the change,
    "换导师"), or recorded as past when the sentence names it as the old one ("从上海搬到深圳" for
    上海) or ends it (``past``: "不再做数据分析了", ``verify``). Superseded values move to ``past``
    with their dates. A value said before one it would replace (batches applied out of order) does
    not replace it: it is past from when the newer one was said."""
    ended = past
    current, past = attribute_values(old)
    same = [c for c in current if normalize(c["value"]) == normalize(new["value"])]
    if ended or said_as_old(new["value"], sentence):
        if not any(normalize(p["value"]) == normalize(new["value"]) for p in past):
            gone = same[0] if same else {"value": new["value"], "source_ids": new["source_ids"]}
            past.append({**gone, "until": new["valid_from"]})
        current = [c for c in current if c not in same]
    elif same:
        return old or {}
    else:
        gone = {
            normalize(c["value"])
            for c in replaced_items(
                predicate, sentence, current, new["value"], lambda c: c["value"], lambda c: str(c.get("evidence") or ""), cue=cue
            )
        }
        newer = sorted(
            str(c.get("valid_from", ""))
            for c in current
            if normalize(c["value"]) in gone and later(c.get("valid_from"), new.get("valid_from"))
        )
        if newer:  # said after this one: it stays current, and this one was replaced when it was said
            past.append({**new, "until": newer[0]})
            gone = {
                normalize(c["value"])
                for c in current
                if normalize(c["value"]) in gone and not later(c.get("valid_from"), new.get("valid_from"))
            }
            past += [{**c, "until": new["valid_from"]} for c in current if normalize(c["value"]) in gone]
            current = [c for c in current if normalize(c["value"]) not in gone]
        else:
            past += [{**c, "until": new["valid_from"]} for c in current if normalize(c["value"]) in gone]
            current = [c for c in current if normalize(c["value"]) not in gone] + [new]
    return stored(current, past, lang)


def later(a: Any, b: Any) -> bool:
    """Whether stored time ``a`` is after ``b`` (False when either is unknown)."""
    x, y = instant(a) if a else None, instant(b) if b else None
    return bool(x and y and x > y)


def stored(current: list[dict[str, Any]], past: list[dict[str, Any]], lang: str) -> dict[str, Any]:
    """An attribute's stored shape from its current and past values."""
    past = [p for p in past if all(normalize(p["value"]) != normalize(c["value"]) for c in current)][-PAST_KEPT:]
    if not current:  # only an old value was said: it is past, and nothing is known to be current
        return {"value": "", "source_ids": [], "values": [], "past": past}
    joined = ("、" if lang == "zh" else ", ").join(c["value"] for c in current)
    out = {
        "value": joined,
        "source_ids": sorted({i for c in current for i in c.get("source_ids", [])}),
        "valid_from": max(str(c.get("valid_from", "")) for c in current),
        "values": current,
    }
    return {**out, "past": past} if past else out


def settled_attributes(attributes: dict[str, Any]) -> dict[str, tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """An entity's attributes by canonical predicate (``supersede.kind``, normalised): the name
    first written, and the current and past values as ``supersede.settle`` says they stand, the
    values of attributes written under two spellings of one predicate ("住在", "移居") together.

    The order is the store's in no way: attributes come by when they were first said, then by name.
    A stored object's key order is not kept everywhere (PostgreSQL's jsonb reorders keys), and the
    entities layer keeps the first attributes that fit its share, so the same memory on SQLite and
    on PostgreSQL must list them alike."""
    groups: dict[str, tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = {}
    read = {k: attribute_values(a if isinstance(a, dict) else {"value": str(a)}) for k, a in attributes.items()}
    for key in sorted(read, key=lambda k: (min((str(v.get("valid_from") or "") for v in (*read[k][0], *read[k][1])), default=""), k)):
        current, before = read[key]
        _, now, then = groups.setdefault(normalize(kind(key)), (key, [], []))
        now += [c for c in current if c.get("value") and all(normalize(str(c["value"])) != normalize(str(x["value"])) for x in now)]
        then += before
    out = {}
    for predicate, (key, now, then) in groups.items():
        now, then = settle(canonical(key), now, then)
        out[predicate] = (key, now, then)
    return out
