"""The developer's own extraction schemas: a pydantic model for the entities the entity layer keeps
(``Memory(entity_schema=EntityExtraction)``) or for a one-off extraction (``Memory.extract``).

    check_schema(EntityExtraction, "entity_schema")   a pydantic model class, or InvalidInput
    entity_items(EntityExtraction)                     where its entities are (InvalidInput if nowhere)
    extract_schema(model, messages, Schema)            ask, parse, repair, retry (``structured.generate``)
    to_entity(item)                                    one of its entities as memstack's Entity
    relations_of(value)                                its relations as memstack's Relations ([] if it has none)
    grounded(value, messages)                          the value less the named items nobody said

A schema's entities are where the articles' ``EntityExtraction`` has them: a list field of models
with a ``name`` (``entities: list[Entity]``), or the model itself when it has a ``name``. Their
``type``/``entity_type``, ``description``, ``aliases`` and ``attributes`` (a dict, or a list of
key/value items) map onto memstack's entity records, grounded in the turns as every entity is;
every other field (``confidence``, anything of the developer's) is kept as given, in the record's
``fields``. A schema may also hold relations, as the articles' ``KnowledgeGraph`` does: a list
field of models with a source and a target (``source``/``head``/``subject``/``from_``,
``target``/``tail``/``object``/``to``) and a label (``relation``/``predicate``/``type``/``label``).
They become the graph layer's relations; their evidence is taken from the turns, as for every
relation, not from the model's ``evidence`` field (a model's quote drifts from the text). The
prompt is in the conversation's language; the schema's field descriptions reach the model
through the JSON schema.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from .. import prompts
from ..errors import InvalidInput
from ..types import Message
from .base import ChatModel
from .extract import Attribute, Entity, Relation, language, render_turns
from .grounding import name_sources
from .structured import Structured, generate

T = TypeVar("T", bound=BaseModel)

#: field names read as an entity's type and description (the articles write entity_type)
TYPE_FIELDS = ("type", "entity_type", "category", "kind")
DESCRIPTION_FIELDS = ("description", "desc", "summary")
MAPPED = ("name", "aliases", "attributes", *TYPE_FIELDS, *DESCRIPTION_FIELDS)
#: field names read as a relation's two ends and its label (in this order of preference)
SOURCE_FIELDS = ("source", "head", "subject", "from_", "src")
TARGET_FIELDS = ("target", "tail", "object", "to", "dst")
LABEL_FIELDS = ("relation", "predicate", "relation_type", "type", "label")


def check_schema(schema: Any, field: str = "schema") -> type[BaseModel]:
    """``schema`` itself when it is a pydantic model class; InvalidInput naming what it is otherwise."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    what = (
        f"an instance of {type(schema).__name__}"
        if isinstance(schema, BaseModel)
        else f"the class {schema.__name__}"
        if isinstance(schema, type)
        else f"a {type(schema).__name__}"
    )
    raise InvalidInput(f"{field} must be a pydantic model class (a subclass of pydantic.BaseModel), got {what}", field=field)


def entity_items(schema: type[BaseModel]) -> str | None:
    """Where the schema's entities are: the name of its list field of named models, or None when
    the schema is one entity itself (it has ``name``). InvalidInput when it has neither."""
    for name, info in schema.model_fields.items():
        item = _list_item(info.annotation)
        if item is not None and "name" in item.model_fields:
            return name
    if "name" in schema.model_fields:
        return None
    raise InvalidInput(
        f"entity_schema {schema.__name__} has no entities: give it a list of models with a name field "
        "(as the articles' EntityExtraction.entities: list[Entity]), or a name field itself",
        field="entity_schema",
    )


def _list_item(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) in (list, tuple, Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0]
    return None


def relation_items(schema: type[BaseModel]) -> str | None:
    """The name of the schema's list field of relations (models with a source and a target
    field, see ``SOURCE_FIELDS``), or None when it has none."""
    for name, info in schema.model_fields.items():
        item = _list_item(info.annotation)
        if item is not None and _first(item.model_fields, SOURCE_FIELDS) and _first(item.model_fields, TARGET_FIELDS):
            return name
    return None


def _first(fields: Mapping[str, Any], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in fields), None)


def relations_of(value: BaseModel) -> list[Relation]:
    """The relations of a value of the developer's schema as memstack's Relations (ends and label
    cut to their limits; a relation missing an end or a label is left out)."""
    where = relation_items(type(value))
    out: list[Relation] = []
    for item in (getattr(value, where) or []) if where else []:
        fields = type(item).model_fields
        ends = [
            str(getattr(item, f) or "").strip() if f else ""
            for f in (_first(fields, SOURCE_FIELDS), _first(fields, LABEL_FIELDS), _first(fields, TARGET_FIELDS))
        ]
        if all(ends):
            out.append(Relation(source=ends[0][:80], relation=ends[1][:60], target=ends[2][:200]))
    return out


def entities_of(value: BaseModel) -> list[BaseModel]:
    """The entity items of a value of an entity schema."""
    where = entity_items(type(value))
    return [value] if where is None else list(getattr(value, where) or [])


def to_entity(item: BaseModel) -> Entity:
    """One entity of the developer's schema as memstack's Entity (lengths cut to its limits);
    the fields it has no place for are kept in ``fields``."""
    data = item.model_dump(mode="json")
    kind = next((str(data[f]) for f in TYPE_FIELDS if data.get(f)), "")
    description = next((str(data[f]) for f in DESCRIPTION_FIELDS if data.get(f)), "")
    aliases = [str(a)[:80] for a in data.get("aliases") or [] if str(a).strip()][:5]
    return Entity(
        name=str(data.get("name") or "")[:80],
        type=kind[:40],
        description=description[:300],
        aliases=aliases,
        attributes=_attributes(data.get("attributes"))[:8],
        fields={k: v for k, v in data.items() if k not in MAPPED},
    )


def _attributes(raw: Any) -> list[Attribute]:
    pairs: list[tuple[Any, Any]] = []
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = [(a.get("key") or a.get("name"), a.get("value")) for a in raw if isinstance(a, Mapping)]
    out = []
    for key, value in pairs:
        if key is None or value is None or isinstance(value, (dict, list)):
            continue
        if str(key).strip() and str(value).strip():
            out.append(Attribute(key=str(key).strip()[:60], value=str(value).strip()[:200]))
    return out


def extract_schema(
    model: ChatModel,
    messages: Sequence[Message],
    schema: type[T],
    *,
    task: str = "extract",
    instructions: str | None = None,
    known: Sequence[str] = (),
    max_tokens: int | None = 768,
    retries: int = 1,
) -> Structured[T]:
    """Ask ``model`` for an instance of ``schema`` from the turns: the task's prompt in the turns'
    language (``instructions`` instead, when given), the turns with their dates, then
    ``structured.generate`` (native schema or instruction, repair, retries with the error shown).
    ModelOutputError (with the raw answer) when the output stays invalid."""
    lang = language(messages)
    rules = prompts.load("custom", lang)
    system = instructions if instructions is not None else rules[task]
    if known:
        system += "\n" + rules["known"] + ("、" if lang == "zh" else ", ").join(known)
    turns = render_turns(messages, lang)
    if not turns.strip():
        raise InvalidInput("no user or assistant turn with text to extract from", field="messages")
    conversation = [{"role": "system", "content": system}, {"role": "user", "content": rules["turns"] + "\n" + turns}]
    return generate(model, conversation, schema, retries=retries, max_tokens=max_tokens, language=lang)


def grounded(value: T, messages: Sequence[Message]) -> T:
    """The value without the named items (list items with a ``name``, at the top level) whose name
    no turn mentions: small models invent entities, and memory must not hold what was not said."""
    update: dict[str, Any] = {}
    for field in type(value).model_fields:
        items = getattr(value, field)
        if isinstance(items, list) and items and all(isinstance(i, BaseModel) and "name" in type(i).model_fields for i in items):
            kept = [i for i in items if name_sources(str(getattr(i, "name") or ""), messages)]  # noqa: B009  (a BaseModel of any schema)
            if len(kept) != len(items):
                update[field] = kept
    return value.model_copy(update=update) if update else value
