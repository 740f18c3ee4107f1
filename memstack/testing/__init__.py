"""Contract test suites that every backend passes (shipped, so plugin authors can use them).

Subclass one in a pytest module and implement its factory methods:

- ``StoreContract``: history, state, checkpoints, jobs and delete_user of a Store
- ``UnitStoreContract``: units and their BM25 keyword search (``memstack.testing.units``)
- ``VectorIndexContract``: nearest-neighbour search (``memstack.testing.vectors``)
- ``RecordStoreContract``, ``UsageLogContract``: versioned records with their audit trail, and
  model calls (``memstack.testing.records``)
- ``DashboardContract``: the tenant's users with their counts and a person's audited corrections
  (``memstack.testing.dashboard``)
- ``MemoryContract``, ``AsyncMemoryContract``: Memory's behaviour over a store, and the same for
  AsyncMemory through its blocking facade ``Blocking`` (``memstack.testing.memory``)
"""

from .dashboard import DashboardContract
from .memory import AsyncMemoryContract, Blocking, MemoryContract
from .models import ScriptedModel
from .records import RecordStoreContract, UsageLogContract
from .stores import A2, AGENT, OTHER_TENANT, T0, A, B, StoreContract, msg
from .units import UnitStoreContract, assert_same_ranking, unit
from .vectors import EmbeddingCacheContract, VectorIndexContract

__all__ = [
    "A",
    "A2",
    "AGENT",
    "B",
    "OTHER_TENANT",
    "T0",
    "StoreContract",
    "msg",
    "VectorIndexContract",
    "EmbeddingCacheContract",
    "UnitStoreContract",
    "assert_same_ranking",
    "unit",
    "ScriptedModel",
    "RecordStoreContract",
    "UsageLogContract",
    "DashboardContract",
    "MemoryContract",
    "AsyncMemoryContract",
    "Blocking",
]
