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
