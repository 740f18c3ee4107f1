"""MkDocs hooks (mkdocs.yml ``hooks:``): the site's home page is README.md and its benchmarks page
BENCHMARKS.md, read from the repository root at build time, so neither is kept twice.

README.md and BENCHMARKS.md link the way GitHub reads them, from the root (``docs/service.md``);
the pages under docs/ link to them as ``../README.md`` and ``../BENCHMARKS.md``. Both become the
site's own pages here, before MkDocs checks the links (``mkdocs build --strict`` fails on one that
leads nowhere).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: site page -> the file at the root that it shows
SOURCES = {"index.md": "README.md", "benchmarks.md": "BENCHMARKS.md"}
SITE_NAME = {"README.md": "index.md", "BENCHMARKS.md": "benchmarks.md"}


def site_links(markdown: str, *, from_root: bool) -> str:
    """Links written for GitHub, as links between the site's pages."""
    if from_root:
        markdown = re.sub(r"\]\(docs/", "](", markdown)
        prefix = ""
    else:
        prefix = r"\.\./"
    for source, page in SITE_NAME.items():
        markdown = re.sub(rf"\]\({prefix}{re.escape(source)}(?=[)#])", f"]({page}", markdown)
    return markdown


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = SOURCES.get(page.file.src_uri)
    if source is not None:
        return site_links((ROOT / source).read_text(encoding="utf-8"), from_root=True)
    return site_links(markdown, from_root=False)
