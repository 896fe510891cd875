"""`--agent` naming a framework whose extra is not installed: one line naming the extra, exit 2, no database row."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runners.cli import main


@pytest.mark.parametrize(("agent", "module"), [("pydantic-ai", "pydantic_ai"), ("openai-agents", "agents")])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_missing_framework_is_one_line_and_nothing_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, agent: str, module: str,
    command: str,
) -> None:  # fmt: skip
    monkeypatch.setitem(sys.modules, module, None)  # what an environment without the extra finds
    db = tmp_path / "x.duckdb"
    argv = [command, "--agent", agent, "--case", "empty_logs_gateway_timeout_t1", "--db", str(db)]
    if command == "sweep":
        argv += ["--no-gain-threshold", "1,2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"--agent {agent}" in err and "harness-bench[adapters]" in err
    assert not db.exists()


def test_an_installed_framework_runs(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    assert main(["run", "--agent", "pydantic-ai", "--case", "empty_logs_gateway_timeout_t1", "--db", str(db)]) == 0
