"""A model gated against itself is not a regression, whatever transport each run used: the README's gate example with
the candidate the same scripted model in process, against the cassette baseline (openai SDK → HTTP → serve-sim,
replayed offline). Tokens, model calls and tool calls are counted the same on both paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main

ROOT = Path(__file__).resolve().parents[3]
# a dozen cases keep the test fast; on them the tokens counted apart (+73% in process) were a REGRESSION
CASES = [arg for case in sorted(p.name for p in (ROOT / "cassettes" / "openai_scripted").iterdir())[:12]
         for arg in ("--case", case)]  # fmt: skip


def test_scripted_in_process_gated_against_its_cassettes_is_no_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "gate.duckdb")
    cassettes = str(ROOT / "cassettes")
    assert main(["run", "--model", "openai:scripted", "--cassettes", cassettes, "--record-mode", "none",
                 "--db", db, "--label", "baseline", *CASES]) == 0  # fmt: skip
    assert main(["run", "--model", "scripted", "--db", db, "--label", "candidate", *CASES]) == 0
    assert main(["gate", "--db", db, "--baseline", "baseline", "--candidate", "candidate", "--k", "1"]) in (0, 3)
    summary = (tmp_path / "gate-summary.md").read_text()
    assert "| tokens |" in summary and "regressed" not in summary
