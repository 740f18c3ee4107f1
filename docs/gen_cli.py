"""Write docs/cli.md, the command-line reference, from ``memstack.cli``'s argparse parser.

    .venv/bin/python docs/gen_cli.py            # rewrite docs/cli.md
    .venv/bin/python docs/gen_cli.py --check    # exit 1 if docs/cli.md differs (tests/test_cli_docs.py)

The page is what ``memstack --help`` and ``memstack COMMAND --help`` say: each command's one line,
its description, its usage and its options, the options every command takes said once. Help
texts live in memstack/cli/ (each command's in its module's ``declare_*``); change them there and
run this script, never edit the page.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "cli.md"
WIDTH = "100"  # argparse wraps usage lines to $COLUMNS: fixed, so the page is the same everywhere
HEADER = (
    "<!-- generated from memstack/cli.py by docs/gen_cli.py: do not edit; change the help texts there and run"
    " `.venv/bin/python docs/gen_cli.py` (tests/test_cli_docs.py fails while this page differs) -->"
)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def _cell(text: str) -> str:
    """Text for a table cell or a paragraph: no table breaks, no HTML, no emphasis by accident."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*").replace("\n", " ")


def _code(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """A description or epilog as Markdown: its paragraphs, the docs pages it names as links."""
    paragraphs = [" ".join(part.split()) for part in text.strip().split("\n\n")]
    return "\n\n".join(re.sub(r"docs/([\w-]+\.md)", r"[\1](\1)", _cell(p)) for p in paragraphs)


def _options(parser: argparse.ArgumentParser, skip: set[tuple[str, str]]) -> list[str]:
    """The parser's options and arguments as table rows, less ``-h`` and the common options."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        key = (",".join(action.option_strings), action.help or "")
        if key in skip:
            continue
        name = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        if action.required and action.option_strings:
            help_text = f"required; {help_text}" if help_text else "required"
        rows.append(f"| `{_code(name)}` | {_cell(help_text)} |")
    return ["| option | |", "|---|---|", *rows] if rows else []


def _command(name: str, parser: argparse.ArgumentParser, summary: str, skip: set[tuple[str, str]], level: int) -> list[str]:
    out = [f"{'#' * level} memstack {name}", ""]
    if parser.description:
        out += [_prose(parser.description), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    options = _options(parser, skip)
    if options:
        out += [*options, ""]
    subs = _subcommands(parser)
    sums = _summaries(parser)
    for sub_name, sub in subs.items():
        out += _command(f"{name} {sub_name}", sub, sums.get(sub_name, ""), skip, level + 1)
    return out


def render() -> str:
    """The page, as this checkout's memstack/cli/ parser gives it."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        from memstack.cli import _parser

        top = _parser()
        common = {(",".join(a.option_strings), a.help or "") for a in top._actions if a.option_strings and a.help}
        subs = _subcommands(top)
        sums = _summaries(top)
        out = [
            "# Command line",
            "",
            HEADER,
            "",
            _prose(top.description or ""),
            "",
            "```text",
            top.format_usage().strip(),
            "```",
            "",
            _prose(top.epilog or ""),
            "",
            "## Options every command takes",
            "",
            *_options(top, set()),
            "",
            "## Commands",
            "",
            "| command | what it does |",
            "|---|---|",
            *(f"| [`{n}`](#memstack-{n}) | {_cell(sums.get(n, ''))} |" for n in subs),
            "",
        ]
        for name, parser in subs.items():
            out += _command(name, parser, sums.get(name, ""), common, 2)
        return "\n".join(out).rstrip("\n") + "\n"
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md differs from what the parser gives")
    args = parser.parse_args()
    text = render()
    if args.check:
        same = PAGE.is_file() and PAGE.read_text(encoding="utf-8") == text
        print(f"docs/cli.md: {'up to date' if same else 'differs from memstack/cli/: run .venv/bin/python docs/gen_cli.py'}")
        return 0 if same else 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
