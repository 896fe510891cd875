"""The docs site's MkDocs hook (`scripts/mkdocs_hooks.py`), in a real `mkdocs build --strict` of a tiny repository:
a page's link to a repository file outside `docs/` is carried into the site and pointed at its copy; a link that
leaves the repository, names a missing file or a Markdown file outside `docs/` is left alone, so the strict build
fails naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / "scripts" / "mkdocs_hooks.py"


def _build(repo: Path, page: str) -> subprocess.CompletedProcess[str]:
    (repo / "docs").mkdir(parents=True, exist_ok=True)
    (repo / "docs" / "index.md").write_text(f"# Home\n\n{page}\n", encoding="utf-8")
    (repo / "hooks.py").write_bytes(HOOK.read_bytes())
    (repo / "mkdocs.yml").write_text("site_name: t\nstrict: true\nhooks: [hooks.py]\n", encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(repo / "site")],
        cwd=repo, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=120,
    )  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "reports").mkdir(parents=True)
    (root / "reports" / "figure.png").write_bytes(b"\x89PNG not really")
    (root / "reports" / "notes.md").write_text("# notes\n", encoding="utf-8")
    (tmp_path / "outside.png").write_bytes(b"outside")
    return root


def test_a_repository_file_is_carried_and_the_link_points_at_its_copy(repo: Path) -> None:
    done = _build(repo, "![a figure](../reports/figure.png) and [the same](../reports/figure.png#top)")
    assert done.returncode == 0, done.stderr
    assert (repo / "site" / "repo" / "reports" / "figure.png").read_bytes() == b"\x89PNG not really"
    html = (repo / "site" / "index.html").read_text(encoding="utf-8")
    assert 'src="repo/reports/figure.png"' in html and 'href="repo/reports/figure.png#top"' in html


@pytest.mark.parametrize(
    ("link", "why"),
    [("../../outside.png", "leaves the repository"), ("../reports/missing.png", "missing"),
     ("../reports/notes.md", "a Markdown file outside docs/")],
)  # fmt: skip
def test_a_link_the_hook_does_not_carry_fails_the_strict_build(repo: Path, link: str, why: str) -> None:
    done = _build(repo, f"[x]({link})")
    assert done.returncode != 0, why
    assert link in done.stderr, done.stderr
    shutil.rmtree(repo / "site", ignore_errors=True)
