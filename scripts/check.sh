#!/usr/bin/env bash
# The checks that keep the house in shape (issue 28), run by scripts/test.sh before the tests:
# lint and format (ruff). Each prints what it found; the script fails if any fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
status=0
"$PY" -m ruff check memstack tests bench scripts || { echo "ruff check: FAILED"; status=1; }
"$PY" -m ruff format --check memstack tests bench scripts > /dev/null || { "$PY" -m ruff format --check memstack tests bench scripts; echo "ruff format: FAILED (run: .venv/bin/ruff format memstack tests bench scripts)"; status=1; }
exit $status
