"""No output is ever an input; Ctrl-C and a closed stdout end every command cleanly.

Every file a command writes (`show --html`, `gate --summary/--junit/--json`, the files of `report --out` and
`export --inspect`, `merge OUT`) is refused with one line, exit 2, when it is the command's database — named
as itself, through a symlink, a hard link or another relative path — and the database keeps every byte. A
signal sent to a real process at a moment the probe holds (tests/interrupt_probe/sitecustomize.py) ends
`merge`, `export` and `gate` with 130, inputs unchanged, the output absent or whole. A stdout whose reader
has gone changes neither the exit code nor the files written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runners.cli import main
from runners.store.output_files import OutputPathError, write_text
from tests._db import open_read_only
from tests.runners.run.test_interrupts import PROBE, ROOT, _Child

EMPTY = "empty_logs_gateway_timeout_t1"
TIMEOUT = 120.0
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's code, whatever the venv was installed from


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (symlinks as their target) with its hash: what a refused command must not change."""
    out: dict[str, str] = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else (_sha(p) if p.is_file() else "dir")
    return out


def _case_runs(db: Path) -> set[str]:
    con = open_read_only(db)
    try:
        return {str(r[0]) for r in con.execute("SELECT case_run_id FROM case_runs").fetchall()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """a (label base), b (label cand: another model) and g, their merge; read-only for the tests (copied first)."""
    work = tmp_path_factory.mktemp("dbs")
    a, b, g = work / "a.duckdb", work / "b.duckdb", work / "g.duckdb"
    assert main(["run", "--db", str(a), "--case", EMPTY, "--label", "base"]) == 0
    assert main(["run", "--db", str(b), "--case", EMPTY, "--label", "cand", "--model", "scripted:eager"]) == 0
    assert main(["merge", str(g), str(a), str(b)]) == 0
    return {"a": a, "b": b, "g": g}


# -- an output naming the database ----------------------------------------------------------------------------
def _gate(db: str, tmp: Path) -> list[str]:
    return ["gate", "--db", db, "--baseline", "base", "--candidate", "cand", "--k", "1"]


@pytest.fixture(scope="module")
def log_name(dbs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The name `export --inspect` gives the merged file's first log (exported once into a scratch folder)."""
    scratch = tmp_path_factory.mktemp("export") / "logs"
    assert main(["export", "--db", str(dbs["g"]), "--inspect", str(scratch)]) == 0
    return sorted(p.name for p in scratch.iterdir())[0]


# writer -> (file name inside the output folder, argv given --db and the file the command would write)
WRITERS: dict[str, tuple[str | None, Callable[[str, Path, Path], list[str]]]] = {
    "show --html": ("page.html", lambda db, out, tmp: [
        "show", "--db", db, "--label", "base", "--case", EMPTY, "--html", str(out)]),
    "gate --summary": ("s.md", lambda db, out, tmp: [
        *_gate(db, tmp), "--summary", str(out), "--junit", str(tmp / "j.xml")]),
    "gate --junit": ("j.xml", lambda db, out, tmp: [
        *_gate(db, tmp), "--summary", str(tmp / "s.md"), "--junit", str(out)]),
    "gate --json": ("r.json", lambda db, out, tmp: [
        *_gate(db, tmp), "--summary", str(tmp / "s.md"), "--junit", str(tmp / "j.xml"), "--json", str(out)]),
    "report --out report.md": ("report.md", lambda db, out, tmp: ["report", "--db", db, "--out", str(out.parent)]),
    "report --out report.html": ("report.html", lambda db, out, tmp: ["report", "--db", db, "--out", str(out.parent)]),
    "report --out a figure": ("tool_call_distribution.png", lambda db, out, tmp: [
        "report", "--db", db, "--out", str(out.parent)]),
    "export --inspect": (None, lambda db, out, tmp: ["export", "--db", db, "--inspect", str(out.parent)]),
    "merge OUT": ("m.duckdb", lambda db, out, tmp: ["merge", str(out), db]),
}  # fmt: skip
NEEDLE = {"merge OUT": "both OUT and an input"}


@pytest.mark.parametrize("alias", ["itself", "symlink", "hard link", "another relative path"])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_output_naming_the_database_is_refused_and_the_database_keeps_every_byte(
    writer: str, alias: str, dbs: dict[str, Path], log_name: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    name, argv = WRITERS[writer]
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / (name or log_name)
    monkeypatch.chdir(tmp_path)
    if alias in ("itself", "another relative path"):  # the database is the very file the command would write
        shutil.copy(dbs["g"], target)
        db = target if alias == "itself" else Path("out") / ".." / "out" / target.name
    else:
        db = tmp_path / "db.duckdb"
        shutil.copy(dbs["g"], db)
        if alias == "symlink":
            target.symlink_to(Path("..") / db.name)
        else:
            os.link(db, target)
    before, digest = _tree(tmp_path), _sha(tmp_path / db)
    capsys.readouterr()
    assert main(argv(str(db), target, tmp_path)) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    flag = writer.split()[1] if writer != "merge OUT" else "OUT"
    assert NEEDLE.get(writer, f"{flag} ") in lines[0], lines[0]
    assert _sha(tmp_path / db) == digest
    assert _tree(tmp_path) == before, "a refused command wrote or changed a file"


def test_two_outputs_naming_one_file_are_refused(dbs: dict[str, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    argv = [*_gate(str(dbs["g"]), tmp_path), "--summary", str(tmp_path / "x"), "--junit", str(tmp_path / "." / "x")]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--junit" in err and "--summary" in err, err
    assert not (tmp_path / "x").exists()


def test_show_html_creates_its_folder_and_a_full_disk_is_one_line(
    dbs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    show = ["show", "--db", str(dbs["g"]), "--label", "base", "--case", EMPTY, "--html"]
    page = tmp_path / "new" / "folder" / "page.html"
    assert main([*show, str(page)]) == 0  # like report --out and gate's files: the folder is created
    assert page.read_text().startswith("<!DOCTYPE html>") or "<html" in page.read_text()
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    capsys.readouterr()
    assert main([*show, "/dev/full"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "/dev/full" in err, err


def test_a_symlinked_output_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Written through, a link would change a file the command was never given; replaced, the link would be lost."""
    real = tmp_path / "real.md"
    real.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(real.name)
    with pytest.raises(OutputPathError, match="is a symbolic link"):
        write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.md" and real.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real.md"]  # no temporary file left


# -- a real process: a closed stdout -----------------------------------------------------------------------
def _closed_stdout(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`harness-bench ARGV` whose stdout's reader has already gone (as `| head -0` would)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, "-m", "runners.cli", *argv], stdout=w, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, env=ENV, timeout=TIMEOUT)  # fmt: skip
    finally:
        os.close(w)


@pytest.mark.parametrize("command", ["cases", "show", "gate"])
def test_a_closed_stdout_keeps_the_verdict_and_the_files(
    command: str, dbs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = {
        "cases": ["cases"],
        "show": ["show", "--db", str(dbs["g"]), "--label", "base", "--case", EMPTY],
        "gate": [*_gate(str(dbs["g"]), tmp_path), "--allow-inconclusive", "--json", "r.json"],
    }[command]
    done = _closed_stdout(argv, tmp_path)
    assert done.stderr == "", done.stderr
    assert done.returncode == 0
    if command == "gate":  # the same files as with a reader (the reference run in process, in a folder of its own)
        written = {p: (tmp_path / p).read_text() for p in ("gate-summary.md", "gate-junit.xml", "r.json")}
        reference = tmp_path / "open"
        reference.mkdir()
        monkeypatch.chdir(reference)
        assert main(argv) == done.returncode
        assert {p: (reference / p).read_text() for p in written} == written


# -- a real process: a signal at a moment the probe holds ---------------------------------------------------
def _interrupted(argv: list[str], at: str, cwd: Path, sig: signal.Signals = signal.SIGINT) -> tuple[int, str]:
    """Run `harness-bench ARGV`, send `sig` while the probe holds the main thread at `at`; exit code and stderr."""
    child = _Child(argv, at, terminal=False, cwd=cwd, env={"PYTHONPATH": f"{PROBE}{os.pathsep}{ROOT}"})
    sent = False
    try:
        for name, _, _ in child.events(time.monotonic() + TIMEOUT):
            if name == "holding" and not sent:
                time.sleep(0.3)  # past the probe's own lines: the main thread is inside a DuckDB statement
                child.ctrl_c_or_kill(sig)
                sent = True
                time.sleep(0.2)  # the handler has run before the probe lets go
                with contextlib.suppress(BrokenPipeError):  # a command that raised has already exited
                    child.go()
        code = child.wait(TIMEOUT)
        output = child.output()
    finally:
        child.close()
    assert sent, f"the moment {at} never came (exit {code})\n{output}"
    return code, output


def _quiet(output: str) -> None:
    assert "Traceback" not in output and "RuntimeError" not in output and "restore the file" not in output, output


def test_ctrl_c_inside_merge_leaves_no_out_file(dbs: dict[str, Path], tmp_path: Path) -> None:
    a, b = (shutil.copy(dbs[k], tmp_path / f"{k}.duckdb") for k in "ab")
    digests = [_sha(Path(a)), _sha(Path(b))]
    code, output = _interrupted(["merge", "out.duckdb", "a.duckdb", "b.duckdb"], "copy:1", tmp_path)
    assert code == 130, output
    _quiet(output)
    assert "was not created" in output, output
    assert [_sha(Path(a)), _sha(Path(b))] == digests
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.duckdb", "b.duckdb"]  # no OUT, no temporary file


def test_ctrl_c_inside_merge_into_an_existing_file_keeps_it_as_it_was(dbs: dict[str, Path], tmp_path: Path) -> None:
    out, b = shutil.copy(dbs["a"], tmp_path / "out.duckdb"), shutil.copy(dbs["b"], tmp_path / "b.duckdb")
    held, digest = _case_runs(Path(out)), _sha(Path(b))
    code, output = _interrupted(["merge", "out.duckdb", "b.duckdb"], "copy:1", tmp_path)
    assert code == 130, output
    _quiet(output)
    assert "is unchanged" in output, output
    assert _case_runs(Path(out)) == held and _sha(Path(b)) == digest


def test_ctrl_c_after_the_merge_committed_says_the_file_is_complete(dbs: dict[str, Path], tmp_path: Path) -> None:
    for k in "ab":
        shutil.copy(dbs[k], tmp_path / f"{k}.duckdb")
    code, output = _interrupted(["merge", "out.duckdb", "a.duckdb", "b.duckdb"], "commit:1", tmp_path)
    assert code == 130, output
    _quiet(output)
    assert "out.duckdb is complete" in output, output
    assert _case_runs(tmp_path / "out.duckdb") == _case_runs(dbs["g"])


def test_ctrl_c_while_export_loads_writes_nothing(dbs: dict[str, Path], tmp_path: Path) -> None:
    db = shutil.copy(dbs["g"], tmp_path / "g.duckdb")
    digest = _sha(Path(db))
    code, output = _interrupted(["export", "--db", "g.duckdb", "--inspect", "logs"], "load:1", tmp_path)
    assert code == 130, output
    _quiet(output)
    assert _sha(Path(db)) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.duckdb"]


def test_ctrl_c_while_gate_loads_writes_nothing(dbs: dict[str, Path], tmp_path: Path) -> None:
    db = shutil.copy(dbs["g"], tmp_path / "g.duckdb")
    digest = _sha(Path(db))
    code, output = _interrupted([*_gate("g.duckdb", tmp_path), "--json", "r.json"], "pairs:1", tmp_path)
    assert code == 130, output
    _quiet(output)
    assert _sha(Path(db)) == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.duckdb"]
