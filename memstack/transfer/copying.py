"""``copy_store``: every user of a tenant from one store to another, kind by kind, then a verify;
``copy_tenants``/``verify_tenants``: the same for every tenant the source holds.

Resumable: every write is idempotent (``sink``), so a copy killed anywhere (kill -9 included) is
finished by running it again. A destination that holds users of the tenant is refused unless
``into_existing`` (then none of the copied users may exist there: their ids would collide) or it
carries this copy's mark: the mark is written in the destination's state before the first item
and removed after a clean verify, so a rerun of an interrupted copy is told from a foreign store.

LangGraph's own tables (``langgraph``) travel after the users, thread by thread, when the source
has them. The tenant's deletion notes travel after its users, with the source's key (``notes``): a
destination holding notes under another key is refused with the others, before anything is
written, unless the copy leaves the notes behind (``deletions=False``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ..errors import UsageError
from ..stores import Store, VectorIndex
from ..types import Scope
from . import langgraph, notes, sink, source
from .digest import Difference, compare, digests
from .items import DELETION

#: where the mark of a copy under way is kept in the destination (StateStore, per tenant)
MARK_USER, MARK_NAME = "memstack-copy", "copy"

Progress = Callable[[str, str, int], None]


@dataclass(frozen=True)
class CopyReport:
    """What a copy read (per kind), how many users, and the verify's differences (none: clean)."""

    users: int
    read: Mapping[str, int]
    differences: tuple[Difference, ...]
    resumed: bool


def _mark_scope(tenant: str) -> Scope:
    return Scope(user_id=MARK_USER, tenant=tenant)


def located(profile: Mapping[str, Any], dst: Store, index: VectorIndex | None) -> dict[str, Any]:
    """The profile as the destination keeps it: naming where its vectors now are (an index
    outside the store, e.g. Milvus, by its ``location``; none for the store's own), so that
    processes opening the destination with that index are let in (``profile.vectors_mismatch``)."""
    from ..profile import Profile

    where = getattr(index, "location", None) if index is not None and index is not getattr(dst, "vectors", None) else None
    return replace(Profile.from_dict(profile), vectors=where).to_dict()


def check_kinds(src: Store, dst: Store, tenant: str) -> None:
    """UsageError, before anything is written, when the source holds a kind the destination's
    backend cannot keep (the JSON-lines backend keeps no model-made records, no units and no
    LangGraph tables)."""
    for part, what in (("records", "model-made memory"), ("units", "retrieval units or saved memories")):
        held = getattr(src, part, None)
        if getattr(dst, part, None) is None and held is not None and held.users(tenant):
            raise UsageError(
                f"the {type(dst).__name__} backend keeps no {what}, which the source holds; copy to sqlite, postgresql or memory"
            )
    langgraph.check(src, dst, tenant)


def check_destination(src: Store, dst: Store, tenant: str, users: Sequence[str], *, into_existing: bool) -> bool:
    """Whether this is a resumed copy; UsageError for a destination the copy may not write to."""
    mark = dst.state.get(_mark_scope(tenant), MARK_NAME)
    if mark is not None:
        if mark.get("source") != src.url:
            raise UsageError(f"the destination holds a copy from {mark.get('source')!r} under way; finish that one first")
        return True
    held = source.users(dst, tenant)
    if held and not into_existing:
        raise UsageError(
            f"the destination is not empty: tenant {tenant!r} has {len(held)} user{'s' if len(held) != 1 else ''} there; use --into-existing to add to it"
        )
    clash = sorted(set(held) & set(users))
    if clash:
        raise UsageError(
            f"user {clash[0]!r} exists in both stores ({len(clash)} users in all): their ids would collide; copy with --user the others"
        )
    return False


def copy_store(
    src: Store,
    dst: Store,
    *,
    tenant: str = "default",
    users: Sequence[str] | None = None,
    src_index: VectorIndex | None = None,
    dst_index: VectorIndex | None = None,
    into_existing: bool = False,
    batch: int = 500,
    progress: Progress | None = None,
    deletions: bool = True,
) -> CopyReport:
    """Copy the tenant's users (all, or ``users``), profile and deletion notes (of the tenant, or
    of ``users``; none when not ``deletions``) from ``src`` to ``dst``; vectors from ``src_index``
    to ``dst_index`` (either None: none copied, e.g. to re-embed). Verifies at the end; the
    report's ``differences`` are empty when the copy is whole."""
    chosen = list(users) if users is not None else source.users(src, tenant)
    check_kinds(src, dst, tenant)
    resumed = check_destination(src, dst, tenant, chosen, into_existing=into_existing)
    if deletions:
        notes.check(src, dst, tenant, users)
    dst.state.put(_mark_scope(tenant), {"source": src.url}, MARK_NAME)
    profile = src.profiles.get(tenant)
    if profile is not None:
        dst.profiles.put(tenant, located(profile, dst, dst_index))
    read: Counter[str] = Counter()
    index = src_index if dst_index is not None else None
    for user in chosen:
        for kind, items in source.user_items(src, Scope(user_id=user, tenant=tenant), index=index, batch=batch):
            sink.write(dst, kind, items, index=dst_index)
            read[kind] += len(items)
            if progress is not None:
                progress(user, kind, len(items))
    carried = notes.copy(src, dst, tenant, users) if deletions else 0
    if carried:
        read[DELETION] = carried
    rows = langgraph.copy(src, dst, tenant, users)
    if rows:
        read[langgraph.KIND] = rows
    differences = verify(
        src,
        dst,
        tenant=tenant,
        users=chosen,
        src_index=index,
        dst_index=dst_index if index is not None else None,
        noted=users,
        deletions=deletions,
    )
    if not differences:
        dst.state.delete(_mark_scope(tenant), MARK_NAME)
    return CopyReport(len(chosen), MappingProxyType(dict(read)), tuple(differences), resumed)


def verify(
    src: Store,
    dst: Store,
    *,
    tenant: str = "default",
    users: Sequence[str] | None = None,
    src_index: VectorIndex | None = None,
    dst_index: VectorIndex | None = None,
    noted: Sequence[str] | None | bool = True,
    deletions: bool = True,
) -> list[Difference]:
    """The differences between the two stores for the tenant's users (all of either, or
    ``users``), and their deletion notes (``deletions``): of the ``noted`` users (None: the whole
    tenant's; True, the default: ``users``' when given, else the whole tenant's)."""
    chosen = sorted(set(users) if users is not None else set(source.users(src, tenant)) | set(source.users(dst, tenant)))
    whose = (list(users) if users is not None else None) if noted is True else noted
    options: dict[str, Any] = {"noted": whose, "deletions": deletions}
    return compare(digests(src, tenant, chosen, index=src_index, **options), digests(dst, tenant, chosen, index=dst_index, **options))


def held_tenants(store: Store, *, deletions: bool = True) -> list[str]:
    """The tenants a whole-store copy walks: those holding data (``Store.tenants``), LangGraph
    rows (a store used as a checkpointer only) and, with ``deletions``, deletion notes (a tenant
    whose every user was forgotten)."""
    noted = set(store.noted_tenants()) if deletions else set()
    return sorted(set(store.tenants()) | set(langgraph.tenants(store)) | noted)


def copy_tenants(
    src: Store, dst: Store, *, tenants: Sequence[str] | None = None, progress: Progress | None = None, **options: Any
) -> dict[str, CopyReport]:
    """``copy_store`` for each tenant (all that the source holds, ``held_tenants``, or these),
    in order; a tenant refused (a non-empty destination) stops the run before it is touched, and
    the tenants copied before it stay copied (a rerun resumes each from its mark)."""
    chosen = list(tenants) if tenants is not None else held_tenants(src, deletions=options.get("deletions", True))
    for tenant in chosen:  # refuse before copying anything
        check_kinds(src, dst, tenant)
        chosen_users = options.get("users")
        wanted = list(chosen_users) if chosen_users is not None else source.users(src, tenant)
        check_destination(src, dst, tenant, wanted, into_existing=options.get("into_existing", False))
        if options.get("deletions", True):
            notes.check(src, dst, tenant, options.get("users"))
    return {tenant: copy_store(src, dst, tenant=tenant, progress=progress, **options) for tenant in chosen}


def verify_tenants(
    src: Store, dst: Store, *, src_index: VectorIndex | None = None, dst_index: VectorIndex | None = None, deletions: bool = True
) -> list[tuple[str, Difference]]:
    """``verify`` for every tenant either store holds (``held_tenants``): (tenant, difference)
    pairs, none when equal."""
    found = []
    for tenant in sorted(set(held_tenants(src, deletions=deletions)) | set(held_tenants(dst, deletions=deletions))):
        found += [(tenant, d) for d in verify(src, dst, tenant=tenant, src_index=src_index, dst_index=dst_index, deletions=deletions)]
    return found
