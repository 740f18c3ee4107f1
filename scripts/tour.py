#!/usr/bin/env python3
"""Run the README's tour as a new user would: a fresh clone of this repository's HEAD, a fresh
virtualenv, every block marked ``<!-- tour -->`` in README.md in order, as written, in one shell
session (so ``source .venv/bin/activate`` in one block holds for the next ones).

Bash blocks run as they are, except two lines: ``bash scripts/test.sh`` (the tests run this
script) and ``memstack serve``, which a reader leaves running in another terminal while trying
the next block: here it runs in the background, the next block starts once ``/health`` answers,
and it stops (Ctrl-C) when that block ends.
Python blocks run with the session's ``python``. A block that fails stops the tour, exit 1.

    python3 scripts/tour.py [--keep]      # the clone and the store go in a temporary directory
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "<!-- tour -->"
FENCE = re.compile(r"```(bash|python)\n(.*?)```", re.DOTALL)
HEALTH_SECONDS = 600


def blocks(readme: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block right after a tour mark, in order."""
    out = []
    for part in readme.split(MARK)[1:]:
        found = FENCE.match(part.lstrip("\n"))
        if not found:
            raise SystemExit(f"tour: a {MARK} mark is not followed by a bash or python block: {part[:80]!r}")
        out.append((found.group(1), found.group(2)))
    return out


def session(readme: str) -> str:
    """The tour as one bash script."""
    lines = ["set -euo pipefail", "trap 'kill $SERVE_PID 2>/dev/null || true' EXIT", "SERVE_PID="]
    serving = False
    for n, (lang, code) in enumerate(blocks(readme), 1):
        lines.append(f"echo '--- tour block {n} ({lang})' >&2")
        started = False
        if lang == "python":
            lines += ["python - <<'MEMSTACK_TOUR_PY'", code.rstrip("\n"), "MEMSTACK_TOUR_PY"]
            code = ""
        for line in code.splitlines():
            command = line.split("#", 1)[0].strip()
            if "scripts/test.sh" in command:
                continue
            if command.startswith("memstack serve"):
                lines += [f"{command} > serve.log 2>&1 &", "SERVE_PID=$!", _wait_for_health()]
                started = True
                continue
            lines.append(line)
        if serving:  # the block that used the server is done
            lines += ["kill -INT $SERVE_PID; wait $SERVE_PID || true; SERVE_PID="]
        serving = started
    return "\n".join(lines) + "\n"


def _wait_for_health() -> str:
    probe = "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
    return (
        f"for _ in $(seq {HEALTH_SECONDS}); do python -c {shlex.quote(probe)} 2>/dev/null && break; "
        "kill -0 $SERVE_PID 2>/dev/null || { cat serve.log >&2; exit 1; }; sleep 1; done"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone and the store")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memstack-tour-"))
    clone = work / "memstack"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    script = session((clone / "README.md").read_text(encoding="utf-8"))
    (work / "tour.sh").write_text(script, encoding="utf-8")
    # the caller's environment (pip's cache and index settings) without its virtualenv or store
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MEMSTACK_HOME", "MEMSTACK_DB")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "/usr/bin:/bin").split(os.pathsep) if ".venv" not in p)
    env["MEMSTACK_HOME"] = str(work / "home")
    proc = subprocess.run(["bash", str(work / "tour.sh")], cwd=clone, env=env)
    print(f"tour: {'passed' if proc.returncode == 0 else 'FAILED'} ({work / 'tour.sh'})", file=sys.stderr)
    if proc.returncode == 0 and not args.keep:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
