"""The TypeScript client's committed OpenAPI document is the server's own (scripts/openapi.py):
a route, a parameter or a summary changed on the server without `npm run generate` in
clients/typescript fails here, in the Python suite, as well as in scripts/ts-tests.sh (which
also checks the generated types)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_document_is_the_servers():
    spec = importlib.util.spec_from_file_location("openapi_script", ROOT / "scripts" / "openapi.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = json.loads((ROOT / "clients" / "typescript" / "openapi.json").read_text(encoding="utf-8"))
    assert script.document() == committed, "the server's API changed: run `npm run generate` in clients/typescript and commit both files"
