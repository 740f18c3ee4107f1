#!/usr/bin/env bash
# Install memstack with its test dependencies into .venv, start PostgreSQL (with pgvector) on
# 127.0.0.1 through scripts/postgres.sh, and run the whole test suite. Extra arguments go to pytest.
# Without root (no apt), set MEMSTACK_TEST_PG_DSN to an existing server instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
if [ -z "${MEMSTACK_TEST_PG_DSN:-}" ]; then
  dsn_line=$(bash scripts/postgres.sh | tail -n 1)
  export MEMSTACK_TEST_PG_DSN=${dsn_line#PG_DSN=}
fi
export MEMSTACK_HOME=${MEMSTACK_HOME:-$(mktemp -d)}
exec .venv/bin/python -m pytest -q "$@"
