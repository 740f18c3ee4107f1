#!/usr/bin/env bash
# Install memstack with its test dependencies into .venv, start PostgreSQL (with pgvector) on
# 127.0.0.1 through scripts/postgres.sh, and run the whole test suite, the README's tour
# (scripts/tour.py), the tests against a Milvus server (scripts/milvus-tests.sh) and a Chroma server
# (scripts/chroma-tests.sh), the dashboard's tests in headless Chromium (scripts/ui-tests.sh) and
# the TypeScript client's (scripts/ts-tests.sh). Extra
# arguments go to one plain pytest run (and leave the tour and the Milvus server out).
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
# The README's tour (scripts/tour.py: a fresh clone, a fresh virtualenv, the README's blocks as
# written) runs beside the tests that do not use the local model, and the local-model tests run
# after it, beside the rest of those tests (see below). Arguments go to one
# plain pytest run instead; MEMSTACK_SKIP_TOUR=1 leaves the tour out.
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest -q "$@"
fi
status=0
# lint, format and the house's other checks (scripts/check.sh: about a minute and a half on a
# fresh clone, mypy without its cache) run beside everything below; their output comes at the end
check_log=$(mktemp)
bash scripts/check.sh > "$check_log" 2>&1 &
check_pid=$!
tour_pid=
if [ -z "${MEMSTACK_SKIP_TOUR:-}" ]; then
  tour_log=$(mktemp)
  # at a lower priority: a pip install and the README's runs, off the tests' critical path
  nice -n 5 "$PY" scripts/tour.py > "$tour_log" 2>&1 &
  tour_pid=$!
fi
# The tests against a real Milvus standalone server (scripts/milvus-tests.sh: pytest and the
# server in a private network namespace, one server for the run, ~2-3 minutes mostly waiting on
# the server) run beside them too; MEMSTACK_SKIP_MILVUS=1 leaves them out.
milvus_pid=
if [ -z "${MEMSTACK_SKIP_MILVUS:-}" ]; then
  milvus_log=$(mktemp)
  bash scripts/milvus-tests.sh > "$milvus_log" 2>&1 &
  milvus_pid=$!
fi
# The tests against a real Chroma server (scripts/chroma-tests.sh: `chroma run` and pytest in a
# private network namespace, ~15 s) run beside them too; MEMSTACK_SKIP_CHROMA=1 leaves them out.
chroma_pid=
if [ -z "${MEMSTACK_SKIP_CHROMA:-}" ]; then
  chroma_log=$(mktemp)
  bash scripts/chroma-tests.sh > "$chroma_log" 2>&1 &
  chroma_pid=$!
fi
# The dashboard's tests in headless Chromium (scripts/ui-tests.sh: installs Debian's chromium when
# missing, ~40 s of tests) run beside them too, leaving this run's screenshots of every view in
# artifacts/screenshots/ of the clone (the CI's artifacts); MEMSTACK_SKIP_BROWSER=1 leaves them out.
ui_pid=
if [ -z "${MEMSTACK_SKIP_BROWSER:-}" ]; then
  ui_log=$(mktemp)
  bash scripts/ui-tests.sh > "$ui_log" 2>&1 &
  ui_pid=$!
fi
# The TypeScript client's build, generated-types check and tests under Node (scripts/ts-tests.sh:
# npm ci, tsc, node --test against real `memstack serve` processes, ~30 s) run beside them too;
# MEMSTACK_SKIP_TS=1 leaves them out.
ts_pid=
if [ -z "${MEMSTACK_SKIP_TS:-}" ]; then
  ts_log=$(mktemp)
  bash scripts/ts-tests.sh > "$ts_log" 2>&1 &
  ts_pid=$!
fi
# The tests that do not use the local model run in the background; once the side runs above are
# done (about 8 minutes), the local-model tests run beside them (llama.cpp on one thread, the
# other tests mostly on one core: beside the side runs' installs and servers the local-model tests
# would pass their time limits on 2 cores, beside these they keep them).
.venv/bin/python -m pytest -q -m "not local_model and not milvus_server and not chroma_server and not browser" &
main_pid=$!
if [ -n "$ts_pid" ]; then
  if wait "$ts_pid"; then
    echo "TypeScript client tests: $(grep -E '^# (pass|fail) ' "$ts_log" | tr '\n' ' ')"
  else
    tail -n 80 "$ts_log"; echo "TypeScript client tests: FAILED"; status=1
  fi
fi
if [ -n "$ui_pid" ]; then
  if wait "$ui_pid"; then
    echo "Browser tests: $(tail -n 2 "$ui_log" | head -n 1) ($(tail -n 1 "$ui_log"))"
  else
    tail -n 80 "$ui_log"; echo "Browser tests: FAILED"; status=1
  fi
fi
if [ -n "$milvus_pid" ]; then
  if wait "$milvus_pid"; then
    echo "Milvus server tests: $(tail -n 1 "$milvus_log")"
  else
    tail -n 80 "$milvus_log"; echo "Milvus server tests: FAILED"; status=1
  fi
fi
if [ -n "$chroma_pid" ]; then
  if wait "$chroma_pid"; then
    echo "Chroma server tests: $(tail -n 1 "$chroma_log")"
  else
    tail -n 80 "$chroma_log"; echo "Chroma server tests: FAILED"; status=1
  fi
fi
if [ -n "$tour_pid" ]; then
  if wait "$tour_pid"; then
    echo "README tour: passed"
  else
    tail -n 80 "$tour_log"; echo "README tour: FAILED"; status=1
  fi
fi
local_log=$(mktemp)
local_status=0
# a home of its own: the two runs are at once now
MEMSTACK_HOME=$(mktemp -d) .venv/bin/python -m pytest -q -m local_model > "$local_log" 2>&1 || local_status=$?
wait "$main_pid" || status=$?
echo "Local-model tests:"
if [ "$local_status" -ne 0 ]; then
  cat "$local_log"; status=1
else
  grep -v '^SKIPPED' "$local_log" | tail -n 40
fi
if wait "$check_pid"; then
  cat "$check_log"
else
  cat "$check_log"; echo "checks (scripts/check.sh): FAILED"; status=1
fi
exit $status
