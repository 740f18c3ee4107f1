#!/usr/bin/env bash
# The tests against a real Chroma server (tests/test_vectors_chroma_server.py, marker
# chroma_server): `chroma run` (pip install -e ".[chroma]") is started by the tests on a loopback
# port. Like the Milvus server tests, pytest and the server run in a private network namespace
# where only loopback exists (no root needed: --map-root-user), and in a private PID namespace, so
# that the server dies with pytest. Extra arguments go to pytest (default: that module).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- tests/test_vectors_chroma_server.py tests/test_transfer_chroma.py
exec unshare --net --map-root-user --pid --fork --mount-proc --kill-child \
  sh -c 'ip link set lo up && exec .venv/bin/python -m pytest -q -m chroma_server "$@"' chroma-tests "$@"
