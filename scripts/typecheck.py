"""The type check of memstack/ (scripts/check.sh): mypy with the settings in pyproject.toml.

The public modules (``[[tool.mypy.overrides]]`` with mypy's strict flags) must have no error.
Every other module is held to its count of errors in ``scripts/mypy-baseline.txt``: the check
fails when a module has more than its count (a module not listed has 0), and says so when a
count went down, so the baseline only shrinks. ``--update`` writes the counts of now into the
baseline, and refuses when one of them grew (or a strict module has an error) once it exists.

    .venv/bin/python scripts/typecheck.py            # the check
    .venv/bin/python scripts/typecheck.py --update   # after fixing errors: lower the baseline
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def strict_modules() -> list[str]:
    """The module patterns of pyproject's strict override (the one that disallows untyped defs)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return [m for o in config.get("overrides", []) if o.get("disallow_untyped_defs") for m in o["module"]]


def module_of(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_strict(path: str, patterns: list[str]) -> bool:
    name = module_of(path)
    return any(fnmatch.fnmatchcase(name, p) or (p.endswith(".*") and name == p[:-2]) for p in patterns)


def run_mypy() -> list[tuple[str, str]]:
    """mypy's errors, each as (path, line of output)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"], cwd=ROOT, capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not any(ERROR.match(x) for x in lines)):
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit(f"typecheck: mypy could not run (exit {proc.returncode})")
    return [(m["path"], x) for x in lines if (m := ERROR.match(x))]


def read_baseline() -> Counter[str]:
    counts: Counter[str] = Counter()
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                count, path = line.split()
                counts[path] = int(count)
    return counts


def write_baseline(counts: Counter[str]) -> None:
    head = [
        "# mypy's errors per module outside the strict public ones (scripts/typecheck.py): a module",
        "# may not have more; lower a count when you fix errors (scripts/typecheck.py --update)",
    ]
    rows = [f"{n} {path}" for path, n in sorted(counts.items()) if n]
    BASELINE.write_text("\n".join(head + rows) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write today's counts into the baseline (never higher ones)")
    args = parser.parse_args()
    patterns = strict_modules()
    errors = run_mypy()
    now = Counter(path for path, _ in errors)
    baseline = read_baseline()
    failed = False
    public = [line for path, line in errors if is_strict(path, patterns)]
    if public:
        print("\n".join(public))
        print(f"typecheck: {len(public)} error(s) in the strict public modules")
        failed = True
    listed_public = sorted(p for p in baseline if is_strict(p, patterns))
    if listed_public and not args.update:  # (--update drops them)
        print(f"typecheck: the baseline may not list strict public modules: {', '.join(listed_public)}")
        failed = True
    grown = {p: n for p, n in now.items() if not is_strict(p, patterns) and n > baseline.get(p, 0)}
    for path, n in sorted(grown.items()):
        print("\n".join(line for p, line in errors if p == path))
        print(f"typecheck: {path}: {n} error(s), the baseline allows {baseline.get(path, 0)}")
    failed = failed or bool(grown)
    shrunk = {p: n for p, n in baseline.items() if now.get(p, 0) < n}
    if args.update:
        if failed and BASELINE.exists():
            print("typecheck: not updating the baseline while the check fails")
            return 1
        write_baseline(Counter({p: n for p, n in now.items() if not is_strict(p, patterns)}))
        print(f"typecheck: baseline written: {sum(now.values())} error(s) in {len(now)} module(s)")
        return 0
    if shrunk and not failed:
        print(
            f"typecheck: {len(shrunk)} module(s) have fewer errors than the baseline allows "
            f"({', '.join(sorted(shrunk))}): lower it with scripts/typecheck.py --update"
        )
    total = sum(n for p, n in now.items() if not is_strict(p, patterns))
    print(
        f"typecheck: {'FAILED' if failed else 'ok'}: strict public modules {len(public)} error(s); "
        f"the rest {total} error(s), baseline {sum(baseline.values())}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
