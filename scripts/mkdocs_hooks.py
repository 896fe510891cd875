"""MkDocs hook: the pages link to files of this repository outside `docs/` the way GitHub reads them.

A page may link to a figure, a generated report or a data file of the repository with the relative link that works
when the page is read on GitHub (`![power](../reports/calibration/power.png)` in `docs/calibration.md`). MkDocs
only knows the files under `docs/`, so this hook carries each such file into the site under `repo/` (the same
path below it) and points the link there. Only files inside the repository that are not Markdown are carried (a
Markdown file would become a page of its own, with links of its own): a link that leaves the repository, names a
file that does not exist or names a Markdown file outside `docs/` is left as written, and `mkdocs build --strict`
fails on it. `mkdocs.yml` names this module under `hooks:`.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# `](target)` or `](target#anchor)` of a Markdown link or image whose target climbs out of the page's folder.
_LINK = re.compile(r"\]\((?P<target>(?:\.\./)+[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
_PREFIX = "repo"


def _repo_file(config: MkDocsConfig, page_src_uri: str, target: str) -> str | None:
    """The repository-relative path a page's link names, when it is a file this hook carries; else None."""
    docs = Path(config.docs_dir).resolve()
    root = Path(config.config_file_path).resolve().parent
    resolved = (docs / posixpath.dirname(page_src_uri) / target).resolve()
    if resolved.is_relative_to(docs) or not resolved.is_relative_to(root):
        return None
    if resolved.suffix == ".md" or not resolved.is_file():
        return None
    return resolved.relative_to(root).as_posix()


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add every repository file a page links to as a file of the site under `repo/`."""
    for page_file in list(files.documentation_pages()):
        text = Path(page_file.abs_src_path or "").read_text(encoding="utf-8")
        for match in _LINK.finditer(text):
            path = _repo_file(config, page_file.src_uri, match["target"])
            if path is not None and f"{_PREFIX}/{path}" not in files:
                root = Path(config.config_file_path).resolve().parent
                files.append(File.generated(config, f"{_PREFIX}/{path}", abs_src_path=str(root / path)))
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point each link to a carried repository file at its copy under `repo/`."""

    def rewrite(match: re.Match[str]) -> str:
        path = _repo_file(config, page.file.src_uri, match["target"])
        if path is None:
            return match[0]
        target = posixpath.relpath(f"{_PREFIX}/{path}", posixpath.dirname(page.file.src_uri) or ".")
        return f"]({target}{match['anchor'] or ''})"

    return _LINK.sub(rewrite, markdown)
