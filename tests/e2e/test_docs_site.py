"""The documentation site builds with `mkdocs build --strict` (what `make docs` runs), into a temporary folder: a
broken link or anchor, a missing snippet, an API reference mkdocstrings cannot resolve or a page left out of the nav
fails the build. The API reference documents exactly the names `harness/__init__.py` exports, and the README stays a
front page that points into the site.

Built once per content (tests/_content_cache.py): the site is kept under a hash of every file of the repository
that git does not ignore (a page may include any of them as a snippet, link to it or document its code) but the
tests, of the test files the pages link to, and of the versions of MkDocs and its plugins."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from tests._content_cache import Key, cached

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


BUILDERS = ("mkdocs", "mkdocs-material", "mkdocs-autorefs", "mkdocstrings", "mkdocstrings-python", "griffelib",
            "pymdown-extensions", "Markdown")  # fmt: skip
"""What turns the pages into the site: their versions are part of the cached site's key."""


def _build(out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]


def site_key() -> str | None:
    """The hash of what the build reads, or None outside a git checkout (the site is then built every time)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    if listed.returncode != 0:
        return None
    pages = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    names = {n for n in listed.stdout.decode().split("\0") if n and (ROOT / n).is_file()}
    read = [ROOT / n for n in names if not n.startswith("tests/") or f"../{n}" in pages]
    return Key("docs-site").versions(*BUILDERS).files(ROOT, read).hexdigest()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = site_key()
    if key is None:
        out = tmp_path_factory.mktemp("site")
        _build(out)
        return out
    return cached("docs-site", key, lambda entry: _build(entry / "site")) / "site"


def test_the_site_builds_strict(site: Path) -> None:
    nav_pages = sorted(p.stem for p in DOCS.glob("*.md") if p.name != "index.md")
    assert (site / "index.html").is_file()
    for page in nav_pages:
        assert (site / page / "index.html").is_file(), page


def test_figures_and_reports_of_the_repository_are_carried_into_the_site(site: Path) -> None:
    """The pages link to `../reports/...` (as GitHub reads them); the build carries those files under `repo/`."""
    calibration = (site / "calibration" / "index.html").read_text(encoding="utf-8")
    assert 'src="../repo/reports/calibration/power.png"' in calibration
    assert (site / "repo" / "reports" / "calibration" / "power.png").read_bytes() == (
        ROOT / "reports" / "calibration" / "power.png"
    ).read_bytes()


def test_the_api_reference_documents_every_exported_name_and_only_those(site: Path) -> None:
    listed = re.findall(r"^::: harness\.(\w+)$", (DOCS / "api.md").read_text(encoding="utf-8"), re.M)
    assert len(listed) == len(set(listed)), "a name documented twice"
    assert set(listed) == set(harness.__all__) - {"__version__"}
    page = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in listed:
        assert f'id="harness.{name}"' in page, name


def test_the_readme_is_a_front_page_that_points_into_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 250
    assert max(len(line) for line in lines) <= 300
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "the README keeps no dated measurements (docs/measurements.md)"
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", text))
    assert all((ROOT / link).is_file() for link in links), links
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert pages - {"docs/index.md"} <= links, "every page is reachable from the README"
