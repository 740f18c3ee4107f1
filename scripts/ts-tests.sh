#!/usr/bin/env bash
# The TypeScript client (clients/typescript): install its locked dev dependencies (npm ci), build
# it (tsc: dist/ with .d.ts), type-check the docs' examples, check that its generated types match
# the server's OpenAPI document (regenerated from this checkout: scripts/openapi.py, then
# openapi-typescript; fails if they differ from the committed ones), and run its tests under
# Node's own runner against real `memstack serve` processes. Needs Node 20+ and npm (the npm
# registry, for npm ci); the Python that runs memstack: $MEMSTACK_PYTHON, else .venv/bin/python.
# About 30 s, most of it npm ci and tsc. Regenerate the types: cd clients/typescript && npm run generate.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node > /dev/null && command -v npm > /dev/null || { echo "ts-tests: node and npm are needed (Node 20+)"; exit 1; }
export MEMSTACK_PYTHON=${MEMSTACK_PYTHON:-$PWD/.venv/bin/python}
cd clients/typescript
npm ci --no-audit --no-fund --loglevel=error
npm run -s build
npm run -s check-generated
npm test
