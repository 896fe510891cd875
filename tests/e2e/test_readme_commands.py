"""The README's own commands run as written: the five-minute tour and the offline gate, each `harness-bench` line
through the real command line in an empty folder (files of the repository it names, like `cassettes`, taken from the
checkout), ending with the exit code its comment states; what the README says they show is checked in the database.
Getting started repeats the tour, so it must be the same block; and the Python API example of the running page runs
as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from runners.cli import main
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def _block_after(text: str, heading: str) -> str:
    return _bash_blocks(text.split(heading, 1)[1])[0]


def _commands(block: str) -> list[tuple[list[str], int]]:
    """Each command line of a block (continuations joined) with the exit code its comment states (default 0)."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        if not line.strip():
            continue
        said = re.search(r"#.*\bexit (\d+)", line)
        out.append((shlex.split(line, comments=True), int(said.group(1)) if said else 0))
    return out


def _run(block: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the tour and the offline gate need no key
    for argv, expected in _commands(block):
        assert argv[0] == "harness-bench", argv
        args = [str(ROOT / a) if (ROOT / a).exists() and not (folder / a).exists() else a for a in argv[1:]]
        assert main(args) == expected, argv


def test_the_tour_runs_as_written_and_shows_what_the_readme_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tour = _block_after(README, "## A five-minute tour")
    assert tour == _block_after((ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8"), "## A tour")
    _run(tour, tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert "empty_logs_gateway_timeout_t1" in out and "Recommendation: no_gain_threshold=" in out
    con = open_read_only(tmp_path / "tour.duckdb")
    rows = con.execute("SELECT DISTINCT outcome, fallback_kind, stop_reason, budget_hit FROM case_runs").fetchall()
    assert rows == [("FALLBACK", "INSUFFICIENT_EVIDENCE", "INFORMATION_SATURATED", None)]
    assert con.execute("SELECT count(*) FROM case_runs").fetchone() == (8,)


def test_the_offline_gate_runs_as_written_and_finds_the_regression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    block = _block_after(README, "Then gate a model upgrade offline from cassettes:")
    assert _commands(block)[-1][1] == 1, "the README says the gate exits 1"
    _run(block, tmp_path, monkeypatch)
    assert "REGRESSION" in capsys.readouterr().out
    assert (tmp_path / "gate-summary.md").is_file() and (tmp_path / "gate-junit.xml").is_file()


def test_the_python_api_example_of_the_running_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", page.split("## From Python", 1)[1], re.S)[0]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "doc_example"}
    exec(compile(code, "running.md:from-python", "exec"), namespace)
    assert (tmp_path / "bench.duckdb").is_file()
    con = open_read_only(tmp_path / "bench.duckdb")
    assert con.execute("SELECT count(DISTINCT bench_run_id) FROM case_runs").fetchone() == (4,)  # a run, 3 points
