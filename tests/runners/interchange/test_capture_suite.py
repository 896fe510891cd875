"""`capture` of a suite's run: written into the suite's folder, its declared tools' calls become the case's results
and the case replays to the same outcome; written elsewhere, it is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main
from runners.domain.evalset import load_cases
from tests._db import open_read_only
from tests.runners.domain.test_suites import CASES, SUITE


def test_a_suites_run_is_captured_into_its_folder_and_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "tiny"
    suite.mkdir()
    (suite / "suite.yaml").write_text(SUITE, encoding="utf-8")
    (suite / "cases.yaml").write_text(CASES, encoding="utf-8")
    db = tmp_path / "runs.duckdb"
    assert main(["run", "--evalset", str(suite), "--model", "scripted:mocked-path", "--db", str(db)]) == 0
    con = open_read_only(db)
    (run_id,) = con.execute("SELECT case_run_id FROM case_runs").fetchone() or ("",)
    con.close()
    capsys.readouterr()
    assert main(["capture", "--db", str(db), str(run_id), "--out", str(tmp_path / "elsewhere.yaml")]) == 2
    assert "called a suite's tools (get_pods, pod_logs)" in " ".join(capsys.readouterr().err.split())
    out = suite / "captured.yaml"
    assert main(["capture", "--db", str(db), str(run_id), "--out", str(out)]) == 0
    captured = next(c for c in load_cases([str(suite)]) if c.id.startswith("captured_"))
    assert [(f.tool, f.match, f.status.value) for f in captured.fixtures.results] == [
        ("get_pods", {"namespace": "shop"}, "results"),
        ("pod_logs", {}, "error"),
        ("pod_logs", {"pod": "web-2"}, "error"),
    ]
    assert captured.fixtures.results[0].output == "web-1  CrashLoopBackOff  7 restarts"
    replay = tmp_path / "replay.duckdb"
    assert main(["run", "--evalset", str(out), "--model", "scripted", "--db", str(replay), "--strict"]) == 0
