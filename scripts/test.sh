#!/usr/bin/env bash
# Install memstack with its test dependencies into .venv, start PostgreSQL (with pgvector) on
# 127.0.0.1 through scripts/postgres.sh, and run the whole test suite, then the README's tour
# (scripts/tour.py). Extra arguments go to pytest (and leave the tour out).
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
# then the README's tour on a fresh clone in a fresh virtualenv (scripts/tour.py), after the tests
# (beside them it would slow the local-model tests past their time limits on 2 cores);
# MEMSTACK_SKIP_TOUR=1 (or arguments for pytest) leaves it out
status=0
.venv/bin/python -m pytest -q "$@" || status=$?
if [ -z "${MEMSTACK_SKIP_TOUR:-}" ] && [ $# -eq 0 ]; then
  tour_log=$(mktemp)
  if "$PY" scripts/tour.py > "$tour_log" 2>&1; then
    echo "README tour: passed"
  else
    tail -n 80 "$tour_log"; echo "README tour: FAILED"; status=1
  fi
fi
exit $status
