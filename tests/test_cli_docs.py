"""The command line's help and its docs page (issue 28 §3): docs/cli.md is what docs/gen_cli.py
makes of memstack.cli's parser, every command's help says what it does and names a docs page
that exists, the presets named in --help are memstack.presets.PRESETS, and the docs site builds
with ``mkdocs build --strict``, which fails on a link that leads nowhere."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memstack import cli
from memstack.presets import PRESETS

ROOT = Path(__file__).resolve().parent.parent


def _gen_cli():
    spec = importlib.util.spec_from_file_location("memstack_docs_gen_cli", ROOT / "docs" / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub
                found |= _commands(sub, f"{prefix}{name} ")
    return found


def test_the_cli_page_is_what_the_parser_gives():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == _gen_cli().render(), "docs/cli.md differs from memstack/cli.py's parser: run .venv/bin/python docs/gen_cli.py"


def test_the_cli_page_names_every_command():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in _commands(cli._parser()):
        assert f"\n## memstack {name}\n" in page or f"\n### memstack {name}\n" in page, name


def test_every_help_says_what_it_does_and_names_a_docs_page_that_exists():
    top = cli._parser()
    pages = re.findall(r"docs/[\w-]+\.md", top.format_help())
    assert "docs/cli.md" in pages and all((ROOT / p).is_file() for p in pages), pages
    for name, parser in _commands(top).items():
        description = parser.description or ""
        first, *_ = description.split("\n\n")
        assert first.endswith(".") and "\n" not in first and len(first) < 140, (name, first)
        named = re.findall(r"^Docs: (docs/[\w-]+\.md)$", description, re.MULTILINE)
        assert len(named) == 1 and (ROOT / named[0]).is_file(), (name, named)
        assert named[0] in parser.format_help(), name


def test_the_presets_in_the_help_are_the_registry(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside a preset's name
    assert tuple(PRESETS) == cli.PRESET_NAMES
    for command in ("add", "init", "context", "serve", "chat", "bench qa", "bench facts"):
        assert ", ".join(PRESETS) in _commands(cli._parser())[command].format_help(), command


def _mkdocs(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",  # not --quiet: it hides the warnings that --strict counts
            "--config-file",
            str(root / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_site_builds_strict_and_a_broken_link_fails_it(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs site needs: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="the docs site needs: pip install -e '.[docs]'")
    built = _mkdocs(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "cli" / "index.html").is_file()
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Library quick start" in home, "the home page is the README"
    assert "fonts.googleapis.com" not in home, "nothing is fetched from a CDN"
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "README.md", "BENCHMARKS.md"):
        shutil.copy(ROOT / name, copy / name)
    page = copy / "docs" / "privacy.md"
    original = page.read_text(encoding="utf-8")
    for link in ("no-such-page.md", "layers.md#no-such-heading"):
        page.write_text(original + f"\nSee [it]({link}).\n", encoding="utf-8")
        broken = _mkdocs(copy, tmp_path / "broken")
        assert broken.returncode != 0 and link in broken.stdout + broken.stderr, link


def test_the_readme_is_a_front_page_of_at_most_150_lines_that_links_into_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150, "the manual belongs in docs/, the README is a front page"
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"README links to {target}, which does not exist"
