"""Write the service's OpenAPI document, as ``memstack serve`` answers it at ``/openapi.json``, to a
file (or stdout): no server, no store on disk, no model loaded.

    python scripts/openapi.py clients/typescript/openapi.json

The TypeScript client's types are generated from this file (``npm run generate`` in
clients/typescript runs this script, then openapi-typescript); scripts/ts-tests.sh regenerates
both and fails if they differ from the committed ones, so the client cannot drift from the server.
The document is the app's own (``create_app().openapi()``), written with sorted keys off, two-space
indentation and UTF-8 (its Chinese examples as written), one trailing newline: the same app gives
the same bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's memstack, wherever it runs from

from memstack import Memory  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402


def document() -> dict:
    """The OpenAPI document of an app over an in-memory store and a scripted model (the document
    does not depend on either: the routes and schemas are the same for every configuration)."""
    with Memory("memory://") as memory:
        return create_app(memory, ServerConfig(model=ScriptedModel())).openapi()


def main(argv: list[str]) -> int:
    text = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    if len(argv) > 1:
        Path(argv[1]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
