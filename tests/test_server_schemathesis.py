"""schemathesis (a public OpenAPI fuzzer) against the OpenAPI document the app serves, over a real
socket: every operation, valid and invalid inputs (its examples, coverage and fuzzing phases), then
its stateful phase along the document's links (messages added, then read, searched, exported,
imported back and deleted), a bounded number of examples from a fixed seed. No response is a
server error, and every response matches the document: its status declared, its content type,
its body's schema.

The fuzzer runs as its command line (``st run``, the interface it keeps stable) in a subprocess,
against a server in this process; its report is the failure message."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs: pip install 'memstack[server]'")
pytest.importorskip("schemathesis", reason="the fuzzer: pip install 'memstack[test]'")

from memstack import Memory  # noqa: E402
from memstack.server import ServerConfig, create_app  # noqa: E402
from memstack.server.run import BackgroundServer  # noqa: E402
from memstack.testing import ScriptedModel  # noqa: E402

KEY = "key-fuzz"
#: the run, as schemathesis.toml: the fuzzing phase's test cases per operation, the stateful
#: phase's steps per scenario; deterministic (one run is every run: no seed, no example database)
CONFIG = """
[generation]
max-examples = 25
deterministic = true

[checks]
enabled = false
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true

[phases.stateful]
max-steps = 8
# valid steps only: a scenario follows links from what it created
generation.mode = "positive"
# the document's links only: the one link schemathesis infers (GET /v1/tools -> POST .../tools/{name})
# made GET /v1/tools the only scenario start, and no scenario added messages
inference.algorithms = []
"""


def _fuzz(url: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run", f"{url}/openapi.json",
        "--header", f"Authorization: Bearer {KEY}",
        "--workers", "1", "--request-timeout", "30", "--no-color",
        "--report", "ndjson", "--report-ndjson-path", str(workdir / "events.ndjson"),
    ]  # fmt: skip
    # no stray settings of the reader's: the run is this file's alone
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEMATHESIS_")}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=workdir, env=env)


def _figures(report: Path) -> dict[str, Any]:
    """The operations requested (method, path template; the coverage phase's unexpected methods
    included), test cases (requests) and stateful scenarios, from the run's NDJSON events."""
    operations, cases, scenarios = set(), 0, 0
    for line in report.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorded = finished["recorder"].get("cases", {}).values()
        cases += len(recorded)
        scenarios += finished["phase"] == "stateful"
        operations |= {(c["value"]["method"], c["value"]["path"]) for c in recorded}
    return {"operations": operations, "cases": cases, "stateful_scenarios": scenarios}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_input_gives_a_server_error_and_every_response_is_as_documented(tmp_path):
    memory = Memory("memory://", layers="window,retrieval")
    app = create_app(memory, ServerConfig(model=ScriptedModel(default="好的"), api_keys={KEY: "fuzz"}, worker=False))
    documented = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    started = time.monotonic()
    with BackgroundServer(app) as server:
        run = _fuzz(server.url, tmp_path)
    elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    figures = _figures(tmp_path / "events.ndjson")
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected", run.stdout)
    print(
        f"schemathesis: {len(documented)} operations, {figures['cases']} test cases, {figures['stateful_scenarios']} stateful scenarios"
        f" ({links[1] if links else '?'} of {links[2] if links else '?'} links followed) in {elapsed:.1f} s"
    )
    assert documented <= figures["operations"], sorted(documented - figures["operations"])  # every operation was requested
    assert figures["stateful_scenarios"] > 0, run.stdout[-5_000:]
    assert links and int(links[1]) > 0, run.stdout[-5_000:]  # the stateful phase followed the document's links
