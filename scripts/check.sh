#!/usr/bin/env bash
# The checks that keep the house in shape (issue 28), run by scripts/test.sh before the tests:
# lint and format (ruff), types (mypy), import contracts (import-linter), and the docs site (mkdocs build --strict: a broken link, a missing page
# or a heading a link names that is not there fails). Each prints what it found; the script fails if any fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
status=0
"$PY" -m ruff check memstack tests bench scripts docs/*.py || { echo "ruff check: FAILED"; status=1; }
"$PY" -m ruff format --check memstack tests bench scripts docs/*.py > /dev/null || { "$PY" -m ruff format --check memstack tests bench scripts docs/*.py; echo "ruff format: FAILED (run: .venv/bin/ruff format memstack tests bench scripts docs/*.py)"; status=1; }
# types: mypy over memstack/ (scripts/typecheck.py), the public modules strict, the rest held to
# scripts/mypy-baseline.txt (a module may not get more errors)
"$PY" scripts/typecheck.py || { echo "typecheck: FAILED"; status=1; }
# imports: the contracts in pyproject's [tool.importlinter] (the floors from the top down, the
# backends apart, only the command line imports the server, no circles)
log=$(mktemp)
if .venv/bin/lint-imports --no-cache > "$log" 2>&1; then grep -E "^Contracts:" "$log" | sed 's/^/lint-imports: /'; else cat "$log"; echo "lint-imports: FAILED"; status=1; fi
rm -f "$log"
# the docs site, built offline into a scratch directory (mkdocs.yml; strict: any warning fails)
# (not --quiet: it hides the warnings that --strict counts); its log is shown when it fails
site=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict --site-dir "$site" > "$site.log" 2>&1 || { cat "$site.log"; echo "mkdocs build --strict: FAILED"; status=1; }
rm -rf "$site" "$site.log"
exit $status
