"""What each command means for a plain-loop run (`--agent plain`, no envelope and no contract), or its one-line
refusal: whatif has no contract to replay, a sweep of the contract's settings would give identical points, and
compare-stops' default set drops the contract's thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.cli import main
from tests._db import open_read_only

CASES = ("empty_logs_gateway_timeout_t1", "diagnosable_gateway_risk_pool_exhausted_t1")


@pytest.fixture(scope="module")
def plain_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("plain") / "plain.duckdb"
    assert (
        main(["run", "--agent", "plain", "--db", str(db), "--label", "p", *(a for c in CASES for a in ("--case", c))])
        == 0
    )
    return db


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_whatif_refuses_plain_runs(plain_db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    err = _one_line(capsys, ["whatif", "--db", str(plain_db), "--label", "p", "--no-gain-threshold", "1",
                             "--json", str(out)])  # fmt: skip
    assert "plain loop" in err and "compare-stops" in err
    assert not out.exists()


@pytest.mark.parametrize("axis", [["--no-gain-threshold", "1,2"], ["--protocol-violation-threshold", "2,3"]])
def test_a_sweep_of_the_contract_on_the_plain_loop_is_refused(
    axis: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    err = _one_line(capsys, ["sweep", "--agent", "plain", "--case", CASES[0], "--db", str(db), *axis])
    assert f"{axis[0]}: the plain loop" in err
    assert not db.exists()


def test_a_sweep_of_budgets_on_the_plain_loop_runs(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert (
        main(["sweep", "--agent", "plain", "--case", CASES[0], "--db", str(db), "--max-tool-invocations", "1,3"]) == 0
    )


def test_compare_stops_default_set_on_plain_runs_has_no_contract(plain_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert main(["compare-stops", "--db", str(plain_db), "--label", "p", "--json", str(out)]) == 0
    specs = [p["policy"] for p in json.loads(out.read_text())["policies"]]
    assert specs and not [s for s in specs if "no-gain" in s]


@pytest.mark.parametrize(("thresholds", "budgets", "message"), [(["-1"], [], "--no-gain-threshold -1: must be ≥ 1")])
def test_whatif_refuses_values_below_one(
    thresholds: list[str], budgets: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "n.duckdb"
    assert main(["run", "--case", CASES[0], "--db", str(db), "--label", "n"]) == 0
    from runners.api import BenchInputError, whatif

    with pytest.raises(BenchInputError, match="--no-gain-threshold -1: must be an integer ≥ 1"):
        whatif(db, no_gain_thresholds=[-1], label="n")
    with pytest.raises(BenchInputError, match="--max-tool-invocations -5: must be an integer ≥ 1"):
        whatif(db, [1], label="n", tool_budgets=[-5])


@pytest.mark.parametrize("agent", ["plain", "native"])
def test_a_cassette_miss_is_the_bench_s_in_every_loop(
    agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cassettes").mkdir()  # empty: every request misses
    argv = ["run", "--agent", agent, "--case", CASES[0], "--model", "openai:scripted", "--cassettes", "cassettes",
            "--record-mode", "none", "--db", "miss.duckdb"]  # fmt: skip
    assert main(argv) == 2
    assert "re-record" in capsys.readouterr().err
    con = open_read_only("miss.duckdb")
    ((kind, error, passed),) = con.execute("SELECT error_kind, error, passed FROM case_runs").fetchall()
    con.close()
    assert kind == "CASSETTE_MISS" and "re-record with: " in str(error)
    assert passed is None  # unjudged: the bench's failure, never counted as the model failing


def test_show_names_the_loop_that_decided(plain_db: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capsys.readouterr()
    assert main(["show", "--db", str(plain_db), "--case", CASES[1]]) == 0
    text = capsys.readouterr().out
    assert "loop: plain" in text and "plain loop: ADMITTED" in text and "Harness:" not in text
    page = tmp_path / "p.html"
    assert main(["show", "--db", str(plain_db), "--case", CASES[1], "--html", str(page)]) == 0
    assert "plain loop: ADMITTED" in page.read_text() and "Harness: ADMITTED" not in page.read_text()


def test_a_gate_across_loops_says_it_compares_loops(
    plain_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A baseline on the Harness and a candidate on the plain loop: the gate's output says, in one line, that it
    compares the loops, not the models (the API's result names both; the JSON too)."""
    import shutil

    from runners import api

    db = tmp_path / "both.duckdb"
    shutil.copy(plain_db, db)
    assert main(["run", "--db", str(db), "--label", "h", *(a for c in CASES for a in ("--case", c))]) == 0
    capsys.readouterr()
    out = tmp_path / "g.json"
    main(["gate", "--db", str(db), "--baseline", "h", "--candidate", "p", "--k", "1", "--summary",
          str(tmp_path / "g.md"), "--junit", str(tmp_path / "g.xml"), "--json", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if "Different agent loops" in line]
    assert lines == ["⚠️ Different agent loops: the baseline ran `--agent native`, the candidate `--agent plain`; this"
                     " compares the loops (the Harness or none), not the models."], printed  # fmt: skip
    assert json.loads(out.read_text())["loops"] == {"baseline": "native", "candidate": "plain"}
    result = api.gate(db, "h", "p", api.GateThresholds(k=1))
    assert result.loops is not None and (result.loops.baseline, result.loops.candidate) == ("native", "plain")
