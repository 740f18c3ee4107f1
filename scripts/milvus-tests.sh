#!/usr/bin/env bash
# The tests against a real Milvus standalone server (tests/test_vectors_milvus_server.py, marker
# milvus_server). The server (pip install -e ".[milvus-server]") listens on every interface, so
# pytest and the server run in a private network namespace where only loopback exists (no root
# needed: --map-root-user), and in a private PID namespace, so that the server dies with pytest.
# Extra arguments go to pytest (default: that module).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- tests/test_vectors_milvus_server.py tests/test_transfer_milvus.py
# PostgreSQL (scripts/postgres.sh) listens on loopback outside the namespace; its Unix socket is a
# file, which reaches inside: the copy to PostgreSQL and a Milvus server goes through it
pg_socket=${PGSOCKET:-/tmp/pgci/sock}
if [ -n "${MEMSTACK_TEST_PG_DSN:-}" ] && [ -S "$pg_socket/.s.PGSQL.${PGPORT:-5433}" ]; then
  export MEMSTACK_TEST_PG_DSN="postgresql://postgres@/postgres?host=$pg_socket&port=${PGPORT:-5433}"
fi
exec unshare --net --map-root-user --pid --fork --mount-proc --kill-child \
  sh -c 'ip link set lo up && exec .venv/bin/python -m pytest -q -m milvus_server "$@"' milvus-tests "$@"
