import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

pytest_plugins = ["pgsupport", "milvus_support", "chroma_support"]  # `schema` (PostgreSQL), `milvus_server`, `chroma_server` fixtures
