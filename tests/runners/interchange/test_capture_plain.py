"""Capture of a plain-loop run: the steps carry what the plain loop sent (no envelope, so no envelope mistake), the
replay line names `--agent plain`, and replayed as printed it makes the same backend calls to the same outcome."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from runners.cli import main
from tests._db import open_read_only

CASES = (
    "diagnosable_gateway_risk_pool_exhausted_t1",
    "empty_logs_gateway_timeout_t1",
    "generic_kb_gateway_runbook_timeout_t3",
)


def _rows(db: Path) -> list[tuple[object, ...]]:
    con = open_read_only(db)
    try:
        return con.execute(
            "SELECT case_run_id, tool_invocations, outcome, fallback_kind FROM case_runs ORDER BY case_id"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("case", CASES)
def test_a_captured_plain_run_replays_as_it_ran(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--agent", "plain", "--case", case, "--db", "plain.duckdb"]) == 0
    ((run_id, calls, outcome, kind),) = _rows(tmp_path / "plain.duckdb")
    assert calls, "the plain run reached a backend"
    capsys.readouterr()
    assert main(["capture", str(run_id), "--db", "plain.duckdb", "--out", "captured.yaml"]) == 0
    printed = capsys.readouterr()
    replay = next(line for line in (printed.out + printed.err).splitlines() if line.startswith("replay: "))
    argv = shlex.split(replay.removeprefix("replay: "))
    assert argv[argv.index("--agent") + 1] == "plain"
    steps = yaml.safe_load((tmp_path / "captured.yaml").read_text())["cases"][0]["trajectory"]["steps"]
    assert steps and not [s for s in steps if "mistake" in s or "gain" in s], steps
    assert main([*argv[1:], "--db", "replay.duckdb"]) == 0
    ((_, replayed_calls, replayed_outcome, replayed_kind),) = _rows(tmp_path / "replay.duckdb")
    assert (replayed_calls, replayed_outcome, replayed_kind) == (calls, outcome, kind)
