"""Files and folders that fail, and inputs that used to give a silent wrong answer: each path ends in one
line on stderr naming the file or flag and what to do, exit 2 (never a traceback, never 1 outside a
regression), nothing created or changed — or, for a gate verdict, the verdict printed first and the file
error after it. A test per path; real DuckDB files, real folders, the real CLI."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from harness.config import HarnessConfig
from runners.cli import main
from runners.store.migrations import SCHEMA_VERSION, migrate
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
FAMILY = "missing_context"  # 7 cases, the quickest family


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def labelled_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Label `a` once, label `b` twice (2 epochs, then 1): a label spread over two bench runs."""
    db = tmp_path_factory.mktemp("labelled") / "g.duckdb"
    for label, epochs in (("a", "1"), ("b", "2"), ("b", "1")):
        assert main(["run", "--evalset", FAMILY, "--db", str(db), "--label", label, "--epochs", epochs]) == 0
    return db


@pytest.fixture
def work(tmp_path: Path, labelled_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copyfile(labelled_db, tmp_path / "g.duckdb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return tmp_path


# -- damaged and partial databases ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "report"])
def test_a_truncated_duckdb_file_is_named(work: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    db = work / "t.duckdb"
    data = (work / "g.duckdb").read_bytes()
    db.write_bytes(data[:300_000])
    before = _digest(work)
    argv = {"run": ["run", "--evalset", FAMILY], "report": ["report", "--out", str(work / "out")]}[command]
    _one_line_exit_2([*argv, "--db", str(db)], capsys, str(db))
    assert _digest(work) == before and not (work / "out").exists()


@pytest.mark.parametrize("command", ["run", "report", "recommend"])
def test_a_file_holding_only_schema_version_is_named(
    work: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = work / "s.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMP)")
    con.execute("INSERT INTO schema_version VALUES (?, now())", [SCHEMA_VERSION])
    con.close()
    before = _digest(work)
    argv = {"run": ["run", "--evalset", FAMILY], "report": ["report"], "recommend": ["recommend"]}[command]
    _one_line_exit_2([*argv, "--db", str(db)], capsys, str(db), f"schema version {SCHEMA_VERSION}", "no bench_runs")
    assert _digest(work) == before


def _v2_sweep(db: Path) -> None:
    """A schema-v2 database holding a completed two-point sweep (as harness-bench 0.1 wrote it)."""
    con = duckdb.connect(str(db))
    migrate(con, str(db), upto=2)
    con.execute("INSERT INTO sweeps VALUES ('sw-old', now(), now(), 'completed', 'scripted', 'old', '{}', '{}')")
    for threshold in (1, 2):
        bench_run = f"br-old-{threshold}"
        cfg = HarnessConfig(no_gain_threshold=threshold).model_dump_json(
            exclude={"schema_mode", "max_run_observation_bytes"}
        )
        con.execute(
            "INSERT INTO bench_runs VALUES (?, 'sw-old', now(), now(), 'completed', NULL, 'scripted', 'old', ?, 'h',"
            " '[]', '[\"c1\", \"c2\"]', 1, 2, '0.1.0', NULL, NULL, NULL, NULL)",
            [bench_run, cfg],
        )
        for i, (family, outcome) in enumerate((("missing_context", "FALLBACK"), ("diagnosable", "SUCCESS"))):
            con.execute(
                "INSERT INTO case_runs (bench_run_id, case_run_id, case_id, family, model, label, epoch,"
                " no_gain_threshold, protocol_violation_threshold, max_tool_calls, max_model_calls, max_tokens,"
                " outcome, expected_outcome, passed, model_calls, guard_calls, tool_invocations, failed_invocations,"
                " tool_rejections, duplicate_scope_rejections, protocol_violations, no_gain_count, gained_count,"
                " stop_required_delivered, wasted_invocations, input_tokens, output_tokens, wall_ms, reason,"
                " finished_at) VALUES (?, ?, ?, ?, 'scripted', 'old', 1, ?, 2, 10, 12, 200000, ?, ?, true, 3, 1, 2,"
                " 0, 0, 0, 0, 1, 1, false, 0, 1000, 100, 5.0, 'r', now())",
                [bench_run, f"{bench_run}-c{i}", f"c{i}", family, threshold, outcome, outcome],
            )
    con.close()


@pytest.mark.parametrize(
    "argv",
    [["report", "--sweep", "latest", "--out", "rep"], ["recommend"], ["report", "--out", "rep"]],
    ids=["report-sweep-latest", "recommend", "report"],
)
def test_an_old_database_is_read_by_every_reading_command_and_left_unchanged(
    work: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Read through an upgraded temporary copy: old rows hold NULL for settings declared since (schema_mode),
    and the report's charts take them as they are."""
    db = work / "v2.duckdb"
    _v2_sweep(db)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    assert main([*argv, "--db", str(db)]) == 0, capsys.readouterr().err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest, "a reading command changed the file"
    if argv[0] == "report":
        assert (work / "rep" / "report.md").stat().st_size > 0


def test_migrate_upgrades_an_old_database_in_place(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = work / "v2.duckdb"
    _v2_sweep(db)
    assert main(["migrate", "--db", str(db)]) == 0
    assert f"schema version 2 → {SCHEMA_VERSION}" in capsys.readouterr().out
    con = open_read_only(db)
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    con.close()


# -- output files: read-only folders, full disks --------------------------------------------------------------
@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A read-only filesystem (root ignores permission bits, so chmod would prove nothing)."""
    where = tmp_path / "ro"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only tmpfs needs root and mount(8)")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(where)], check=False)
    if proc.returncode != 0:
        pytest.skip("mount -t tmpfs failed")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def full_folder(tmp_path: Path) -> Iterator[Path]:
    """A filesystem with no space left (a small tmpfs filled up): a file there is created, and its write fails."""
    where = tmp_path / "full"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tmpfs needs root and mount(8)")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], check=False).returncode:
        pytest.skip("mount -t tmpfs failed")
    try:
        with contextlib.suppress(OSError), (where / "filler").open("wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_report_into_a_read_only_folder_is_one_line(
    work: Path, read_only_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = read_only_folder / "out"
    _one_line_exit_2(["report", "--db", "g.duckdb", "--out", str(out)], capsys, "cannot write", str(read_only_folder))


def test_gate_prints_its_verdict_before_a_file_it_cannot_write(
    work: Path, full_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_id,) = open_read_only("g.duckdb").execute(
        "SELECT bench_run_id FROM bench_runs WHERE label = 'b' AND epochs = 1"
    ).fetchone() or ("",)
    capsys.readouterr()
    argv = ["gate", "--db", "g.duckdb", "--baseline", "a", "--candidate", "b", "--bench-run", str(run_id), "--k", "1"]
    # 7 cases cannot show a 10-point drop: INCONCLUSIVE (exit 3), but a file it cannot write is exit 2
    summary = full_folder / "s.md"
    assert main([*argv, "--summary", str(summary)]) == 2
    captured = capsys.readouterr()
    assert "INCONCLUSIVE" in captured.out, "the verdict is printed even though the file could not be written"
    (line,) = captured.err.strip().splitlines()
    assert f"cannot write {summary}" in line and "No space left on device" in line
    assert sorted(p.name for p in full_folder.iterdir()) == ["filler"], "no half file, no temporary file"


def test_gate_in_a_read_only_folder_keeps_its_verdict(
    work: Path, read_only_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copyfile(work / "g.duckdb", work / "g2.duckdb")
    monkeypatch.chdir(read_only_folder)  # the default output files land in the current folder
    (run_id,) = open_read_only(work / "g.duckdb").execute(
        "SELECT bench_run_id FROM bench_runs WHERE label = 'b' AND epochs = 1"
    ).fetchone() or ("",)
    capsys.readouterr()
    argv = ["gate", "--db", str(work / "g2.duckdb"), "--baseline", "a", "--candidate", "b", "--bench-run", str(run_id)]
    assert main([*argv, "--k", "1", "--allow-inconclusive"]) == 2
    captured = capsys.readouterr()
    assert "INCONCLUSIVE" in captured.out
    assert "gate-summary.md" in captured.err and "Read-only file system" in captured.err


def test_an_unusable_notebook_output_folder_is_refused_before_any_cell_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [os.sys.executable, "-m", "scripts.run_notebook", str(ROOT / "notebooks" / "threshold_sweep.ipynb"),
         "--out", str(tmp_path / "nb" / "x.ipynb")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_BENCH_NOTEBOOK_OUT": "/dev/full/figs"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: HARNESS_BENCH_NOTEBOOK_OUT /dev/full/figs: cannot write there (Not a directory); give a writable folder"
    ]
    assert not (tmp_path / "nb" / "x.ipynb").exists()


# -- silent wrong answers --------------------------------------------------------------------------------------
def _family_file(tmp: Path, name: str, *, duplicate_first: bool = False, changed: bool = False) -> Path:
    doc = yaml.safe_load((ROOT / "evalsets" / "empty_logs.yaml").read_text(encoding="utf-8"))
    if duplicate_first:
        twin = dict(doc["cases"][0])
        if changed:
            twin["question"] = twin["question"] + " (edited)"
        doc["cases"].append(twin)
    path = tmp / name
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("changed", [False, True], ids=["same-content", "different-content"])
def test_a_duplicate_case_id_in_one_file_is_refused_naming_both(
    tmp_path: Path, changed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _family_file(tmp_path, "dup.yaml", duplicate_first=True, changed=changed)
    n = len(yaml.safe_load(path.read_text(encoding="utf-8"))["cases"])
    line = _one_line_exit_2(["cases", "--evalset", str(path)], capsys, "empty_logs_gateway_timeout_t1")
    assert f"{path}: case" in line and f"duplicate of a case in {path} (its #1; here #{n})" in line


def test_a_duplicate_case_id_across_files_names_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _family_file(tmp_path, "a.yaml")
    second = _family_file(tmp_path, "b.yaml")
    capsys.readouterr()
    assert main(["cases", "--evalset", str(first), "--evalset", str(second)]) == 2
    err = capsys.readouterr().err
    assert f"{second}: case 'empty_logs_gateway_timeout_t1': field id: duplicate of a case in {first}" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_symlink_loop_in_an_evaluation_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ev"
    folder.mkdir()
    _family_file(folder, "ok.yaml")
    os.mkfifo(folder / "pipe.yaml")
    (folder / "loop1.yaml").symlink_to("loop2.yaml")
    (folder / "loop2.yaml").symlink_to("loop1.yaml")
    capsys.readouterr()
    assert main(["cases", "--evalset", str(folder)]) == 2  # and returns: the FIFO is never opened
    err = capsys.readouterr().err
    assert f"{folder}/pipe.yaml: not a regular file" in err
    assert f"{folder}/loop1.yaml: unreadable" in err and f"{folder}/loop2.yaml: unreadable" in err


def test_gate_refuses_a_label_compared_with_itself(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _digest(work)
    _one_line_exit_2(["gate", "--db", "g.duckdb", "--baseline", "a", "--candidate", "a", "--k", "1"], capsys,
                     "compared with itself")  # fmt: skip
    assert _digest(work) == before, "no summary or JUnit file written"


def test_gate_refuses_a_label_spread_over_bench_runs_unless_one_is_picked(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["gate", "--db", "g.duckdb", "--baseline", "a", "--candidate", "b", "--k", "1"]
    line = _one_line_exit_2(argv, capsys, "candidate label 'b' is used by 2 bench runs", "--bench-run")
    assert "2 epoch(s)" in line and "1 epoch(s)" in line
    con = open_read_only("g.duckdb")
    (one,) = con.execute("SELECT bench_run_id FROM bench_runs WHERE label = 'b' AND epochs = 1").fetchone() or ("",)
    con.close()
    capsys.readouterr()
    assert main([*argv, "--bench-run", str(one)]) == 3  # picked: 7 cases × 1 epoch, too few to pass
    assert main([*argv, "--bench-run", str(one), "--allow-inconclusive"]) == 0
    summary = (work / "gate-summary.md").read_text(encoding="utf-8")
    assert "7 cases" in summary
    printed = capsys.readouterr().out
    rows = [line for line in summary.splitlines() if line.startswith("|") and len(line) > 100]
    assert rows and all(row in printed.splitlines() for row in rows), "Markdown table rows are never hard-wrapped"


@pytest.mark.parametrize(
    ("env", "flags", "needle"),
    [
        ({}, ["--cassettes", "{tmp}/../no-such-cassettes/x"], "--cassettes"),
        ({"OPENAI_BASE_URL": "junk"}, ["--cassettes", "{tmp}/cas"], "OPENAI_BASE_URL 'junk'"),
        ({"OPENAI_BASE_URL": "junk"}, [], "OPENAI_BASE_URL 'junk'"),
    ],
    ids=["missing-cassettes", "junk-base-url-replay", "junk-base-url-live"],
)
def test_replay_is_refused_before_any_side_effect(
    work: Path, env: dict[str, str], flags: list[str], needle: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    (work / "cas").mkdir()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HB_KEY", "sk-not-real")
    outside = work.parent / "no-such-cassettes"
    before = _digest(work)
    argv = ["run", "--evalset", FAMILY, "--model", "openai:scripted", "--api-key-env", "HB_KEY", "--db", "r.duckdb"]
    _one_line_exit_2([*argv, *(f.format(tmp=work) for f in flags)], capsys, needle)
    assert _digest(work) == before and not (work / "r.duckdb").exists()
    assert not outside.exists(), "no folder created outside the working folder"


def test_merge_into_a_hard_link_of_an_input_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.link(work / "g.duckdb", work / "alias.duckdb")
    before = _digest(work)
    _one_line_exit_2(["merge", "alias.duckdb", "g.duckdb"], capsys, "alias.duckdb is both OUT and an input")
    assert _digest(work) == before, "the input was modified"


def test_sweep_resume_of_a_completed_sweep_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = work / "sw.duckdb"
    argv = ["sweep", "--db", str(db), "--evalset", FAMILY, "--no-gain-threshold", "1,2", "--epochs", "1"]
    assert main(argv) == 0
    con = open_read_only(db)
    ((sweep_id, finished),) = con.execute("SELECT sweep_id, finished_at FROM sweeps").fetchall()
    con.close()
    _one_line_exit_2(["sweep", "--db", str(db), "--resume", str(sweep_id)], capsys, "already completed")
    con = open_read_only(db)
    assert con.execute("SELECT status, finished_at FROM sweeps").fetchall() == [("completed", finished)]
    con.close()


def test_the_readme_example_report_is_made_by_the_command_beside_it() -> None:
    """The commands reports/README.md prints are the ones the committed example's report names, and the ones
    docs/calibration.md prints beside the example."""
    text = (ROOT / "reports" / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")

    def commands(text: str, before: str) -> list[str]:
        block = text.split(before, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
        return [" ".join(line.split()) for line in block.splitlines() if line.strip()]

    assert commands(page, "was produced, in a folder without") == commands(text, "by exactly:")
    report = (ROOT / "reports" / "example-rewriter-sweep" / "report.md").read_text(encoding="utf-8")
    assert "--sweep latest --out reports/example-rewriter-sweep" in text
    assert "Source: `sweep.duckdb`." in report
    stats = json.dumps(report)
    assert "no_gain_threshold" in stats and "max_tool_invocations" in stats
