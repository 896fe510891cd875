"""In CI (CI=true) a skipped test fails the session unless tests/conftest.py lists it: a check that never
runs where it matters (the report's page check in Chromium) cannot pass unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("ci", "rc", "summary"), [("true", 1, "1 failed, 1 passed"), ("", 0, "1 passed, 1 skipped")])
def test_an_unlisted_skip_fails_in_ci_only(ci: str, rc: int, summary: str, tmp_path: Path) -> None:
    (tmp_path / "test_needs_a_thing.py").write_text(
        "import pytest\n\ndef test_skips():\n    pytest.skip('needs a thing')\n\ndef test_runs():\n    pass\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT, env={**os.environ, "CI": ci, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == rc, proc.stdout[-2000:]
    assert summary in proc.stdout
    if ci:
        assert "skipped in CI (Skipped: needs a thing)" in proc.stdout and "ALLOWED_CI_SKIPS" in proc.stdout


def test_a_test_listed_by_its_node_id_may_skip_in_ci_and_its_neighbours_may_not(tmp_path: Path) -> None:
    (tmp_path / "test_listed.py").write_text(
        "import pytest\nimport tests.conftest as c\n\n"
        "c.ALLOWED_CI_SKIPS['test_listed.py::test_may_skip'] = 'what it needs is beside the clone, or not'\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_may_skip(n):\n    pytest.skip('absent')\n\n"
        "def test_may_not():\n    pytest.skip('absent')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=ROOT, env={**os.environ, "CI": "true", "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed, 2 skipped" in proc.stdout and "test_may_not" in proc.stdout, proc.stdout[-2000:]
