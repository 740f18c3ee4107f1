#!/usr/bin/env bash
# The dashboard's browser tests (tests/test_ui_browser.py, `-m browser`): headless Chromium from
# Debian's `chromium` package, driven by Playwright's Python client (no browser download). Installs
# chromium (and CJK fonts for the screenshots) through apt when it is missing and this runs as
# root; without apt or root the tests are skipped with the reason, except under CI, where a
# missing browser fails them. Screenshots go to artifacts/screenshots/ (MEMSTACK_SCREENSHOTS).
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM=${MEMSTACK_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  if command -v apt-get > /dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing chromium through apt"
    apt-get update -q > /dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-noto-cjk > /dev/null
  else
    echo "no chromium at $CHROMIUM and no apt as root to install it: the browser tests will say so"
  fi
fi
# this run's screenshots only: the old ones are removed first; the folder stays in the clone afterwards
SHOTS=${MEMSTACK_SCREENSHOTS:-$PWD/artifacts/screenshots}
if [ -d "$SHOTS" ]; then find "$SHOTS" -maxdepth 1 -name "*.png" -delete; fi
status=0
.venv/bin/python -m pytest -q -m browser tests/test_ui_browser.py "$@" || status=$?
shots=$(find "$SHOTS" -name '*.png' 2> /dev/null | wc -l)
echo "browser tests exit $status; $shots screenshots in ${SHOTS#"$PWD"/}/"
exit $status
