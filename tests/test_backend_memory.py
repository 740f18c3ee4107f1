from memstack.backends.memory import MemoryStore
from memstack.testing import StoreContract


class TestMemoryStore(StoreContract):
    def new_store(self):
        return MemoryStore()
