"""The one output-path rule, walked over every command that writes.

Each writer — the OTLP file, Inspect logs, `show --html`, a captured case, the what-if JSON, the stop-rule
comparison's JSON and plot, the gate's three files, the report, the real-models report, `merge OUT`, the tag probe's
JSON and database, the database of `run`, `sweep`, `import` and `migrate`, and a cassette a recording run writes — is
given `/dev/full`, a FIFO, a symbolic link and a copy of a character device made with `mknod` as its output. Each is
refused with one line naming the flag, exit 2, and the path is left as it was (its type, its device numbers, its link
target and the file behind it), with no file beside it. `/dev/stdout` is a stream where that is documented (`export
--otel`, `show --html`, `capture --out`: the document on stdout, the note on stderr) and refused in one line
everywhere else.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runners.cli import main
from runners.domain.evalset import load_cases
from runners.domain.profiles import trajectory_for_model
from runners.endpoints.simulator import SimulatorServer
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
CASE = "empty_logs_gateway_timeout_t1"
PROBED = "diagnosable_late_order_deadlock_t4"
"""A case with observations to probe (the empty-logs case has none)."""
KINDS = ("/dev/full", "a FIFO", "a symlink", "a mknod device")
FULL = Path("/dev/full")


@dataclass(frozen=True)
class World:
    """The inputs every writer reads, made once (tests copy nothing out of them: a refused write changes none)."""

    a: Path
    """One bench run, label `base`."""
    g: Path
    """Labels `base` and `cand`: what the gate and `show` read."""
    traces: Path
    """`a` exported as OTLP/JSON with message contents."""
    case_run: str
    """A case run id of `a` (show, capture)."""
    log_name: str
    """The name `export --inspect` gives the first log of `g`."""
    sim_url: str
    """A serve-sim endpoint a recording run records from."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("writers")
    a, b, g, traces = tmp / "a.duckdb", tmp / "b.duckdb", tmp / "g.duckdb", tmp / "a.jsonl"
    assert main(["run", "--db", str(a), "--case", CASE, "--label", "base"]) == 0
    assert main(["run", "--db", str(b), "--case", CASE, "--label", "cand", "--model", "scripted:eager"]) == 0
    assert main(["merge", str(g), str(a), str(b)]) == 0
    assert main(["export", "--db", str(a), "--otel", str(traces), "--otel-content"]) == 0
    con = open_read_only(a)
    (case_run,) = con.execute("SELECT case_run_id FROM case_runs").fetchone() or ("",)
    con.close()
    logs = tmp / "logs"
    assert main(["export", "--db", str(g), "--inspect", str(logs)]) == 0
    log_name = sorted(p.name for p in logs.iterdir())[0]
    with SimulatorServer(load_cases(), trajectory_for=trajectory_for_model) as sim:
        yield World(a, g, traces, str(case_run), log_name, sim.base_url)


@dataclass(frozen=True)
class Writer:
    """A command that writes, and how the test names its output."""

    flag: str
    """What its one line names (the flag, or the role of the output)."""
    argv: Callable[[World, Path, Path], list[str]]
    """Its command line, given the world, its output (a file, or the folder holding it) and a scratch folder."""
    inside: Callable[[World], str] | None = None
    """For a folder output: the file it writes in it (where the special file is put); None: the output is a file."""
    stream: bool = False
    """`/dev/stdout` is written as a stream (documented), not refused."""


def _gate(w: World, tmp: Path) -> list[str]:
    return ["gate", "--db", str(w.g), "--baseline", "base", "--candidate", "cand", "--k", "1"]


WRITERS: dict[str, Writer] = {
    "export --otel": Writer("--otel", lambda w, out, tmp: ["export", "--db", str(w.g), "--otel", str(out)],
                            stream=True),
    "export --inspect": Writer("--inspect", lambda w, out, tmp: ["export", "--db", str(w.g), "--inspect", str(out)],
                               inside=lambda w: w.log_name),
    "show --html": Writer("--html", lambda w, out, tmp: ["show", "--db", str(w.g), w.case_run, "--html", str(out)],
                          stream=True),
    "capture --out": Writer("--out", lambda w, out, tmp: ["capture", w.case_run, "--db", str(w.g), "--out", str(out),
                                                          "--force"], stream=True),
    "whatif --json": Writer("--json", lambda w, out, tmp: ["whatif", "--db", str(w.g), "--label", "base",
                                                           "--no-gain-threshold", "1", "--json", str(out)]),
    "compare-stops --json": Writer("--json", lambda w, out, tmp: ["compare-stops", "--db", str(w.g), "--label", "base",
                                                                  "--policy", "tool-cap:1", "--json", str(out)]),
    "compare-stops --plot": Writer("--plot", lambda w, out, tmp: ["compare-stops", "--db", str(w.g), "--label", "base",
                                                                  "--policy", "tool-cap:1", "--plot", str(out)]),
    "gate --summary": Writer("--summary", lambda w, out, tmp: [*_gate(w, tmp), "--summary", str(out), "--junit",
                                                               str(tmp / "j.xml")]),
    "gate --junit": Writer("--junit", lambda w, out, tmp: [*_gate(w, tmp), "--summary", str(tmp / "s.md"), "--junit",
                                                           str(out)]),
    "gate --json": Writer("--json", lambda w, out, tmp: [*_gate(w, tmp), "--summary", str(tmp / "s.md"), "--junit",
                                                         str(tmp / "j.xml"), "--json", str(out)]),
    "report --out": Writer("--out", lambda w, out, tmp: ["report", "--db", str(w.g), "--out", str(out)],
                           inside=lambda w: "report.md"),
    "real-models --out": Writer("--out", lambda w, out, tmp: ["real-models", "--cassettes", str(ROOT / "cassettes"),
                                                              "--out", str(out)], inside=lambda w: "report.md"),
    "tag-probe --json": Writer("--json", lambda w, out, tmp: ["tag-probe", "--case", PROBED, "--db", str(tmp / "p.db"),
                                                              "--json", str(out)]),
    "tag-probe --db": Writer("--db", lambda w, out, tmp: ["tag-probe", "--db", str(out), "--case", PROBED]),
    "merge OUT": Writer("OUT", lambda w, out, tmp: ["merge", str(out), str(w.a)]),
    "run --db": Writer("--db", lambda w, out, tmp: ["run", "--db", str(out), "--case", CASE]),
    "sweep --db": Writer("--db", lambda w, out, tmp: ["sweep", "--db", str(out), "--case", CASE,
                                                      "--no-gain-threshold", "1"]),
    "import --db": Writer("--db", lambda w, out, tmp: ["import", str(w.traces), "--db", str(out), "--label", "imp"]),
    "migrate --db": Writer("--db", lambda w, out, tmp: ["migrate", "--db", str(out)]),
    "run --cassettes (recording)": Writer(
        "cassette", lambda w, out, tmp: ["run", "--model", "openai:scripted", "--base-url", w.sim_url, "--cassettes",
                                         str(out), "--record-mode", "all", "--case", CASE, "--db", str(tmp / "c.db")],
        inside=lambda w: f"openai_scripted/{CASE}/epoch1.json"),
}  # fmt: skip


def _state(path: Path) -> tuple[object, ...]:
    """What a refused write must leave as it was: the file's type and device numbers, a link's target and the bytes
    behind it (never read from a FIFO or a device)."""
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        behind = path.parent / os.readlink(path)
        return kind, os.readlink(path), hashlib.sha256(behind.read_bytes()).hexdigest()
    if stat.S_ISREG(st.st_mode):
        return kind, hashlib.sha256(path.read_bytes()).hexdigest()
    return kind, st.st_rdev


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _special(kind: str, path: Path) -> None:
    """Put `kind` at `path` (its folder created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "a symlink":
        (path.parent / "behind.txt").write_text("the file the link names\n")
        path.symlink_to("behind.txt")
    else:
        try:  # a copy of /dev/full: written, it fails; replaced, it becomes a regular file
            os.mknod(path, stat.S_IFCHR | 0o666, FULL.stat().st_rdev)
        except PermissionError:
            pytest.skip("mknod is not permitted here (not root, or a container without CAP_MKNOD)")


@pytest.fixture(autouse=True)
def dev_full_kept() -> Iterator[None]:
    """A writer that broke the rule would replace the machine's /dev/full with a regular file (as root, as CI runs):
    put back as it was, and the test fails, rather than leave the machine without it."""
    if not FULL.exists():
        yield
        return
    before = os.lstat(FULL)
    yield
    after = os.lstat(FULL)
    if (stat.S_IFMT(after.st_mode), after.st_rdev) != (stat.S_IFMT(before.st_mode), before.st_rdev):
        FULL.unlink()
        os.mknod(FULL, stat.S_IFMT(before.st_mode) | stat.S_IMODE(before.st_mode), before.st_rdev)
        os.chmod(FULL, stat.S_IMODE(before.st_mode))  # mknod applies the umask
        pytest.fail(f"{FULL} was replaced (put back as it was)")


# A writer that opened a FIFO would wait forever: such a test fails after 60 s instead (pytest-timeout).
FIFO_DEADLINE = pytest.mark.timeout(60, func_only=True)


@FIFO_DEADLINE
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_refuses_a_device_fifo_or_symlink_and_leaves_it_as_it_was(
    writer: str, kind: str, world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = WRITERS[writer]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if kind == "/dev/full":  # the device itself: named as the file, or as the folder a folder output writes in
        if not FULL.exists():
            pytest.skip("no /dev/full on this system")
        out, target = FULL, FULL
    else:
        folder = tmp_path / "out"
        target = folder / w.inside(world) if w.inside else folder / "output"
        out = folder if w.inside else target
        _special(kind, target)
    before = _state(target)
    listing = _listing(target.parent) if target != FULL else []
    capsys.readouterr()
    code = main(w.argv(world, out, scratch))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code == 2, (code, captured.err)
    assert len(lines) == 1 and w.flag in lines[0], captured.err
    assert _state(target) == before, f"{target} was changed"
    if target != FULL:
        assert _listing(target.parent) == listing, "a file was left beside the output"


@FIFO_DEADLINE
@pytest.mark.parametrize("writer", list(WRITERS))
def test_dev_stdout_is_a_stream_where_documented_and_refused_elsewhere(
    writer: str, world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = WRITERS[writer]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    capsys.readouterr()
    code = main(w.argv(world, Path("/dev/stdout"), scratch))
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    if w.stream:
        assert code == 0, captured.err
        first = {"--otel": '{"resourceSpans"', "--html": "<!doctype html>", "--out": "# Captured"}[w.flag]
        assert captured.out.startswith(first), captured.out[:200]
        assert len(lines) >= 1 and lines[0].startswith("wrote /dev/stdout"), captured.err
    else:
        assert code == 2 and len(lines) == 1, captured.err
        assert w.flag in lines[0] and "/dev/stdout" in lines[0], lines[0]
    assert _listing(scratch) == [], "nothing written beside"


@pytest.mark.parametrize("kind", ["a socket", "a block device"])
def test_a_socket_or_a_block_device_is_refused_by_the_rule_itself(kind: str, tmp_path: Path) -> None:
    """The two kinds the walk above does not make (no writer is needed to see the rule refuse them)."""
    import socket

    from runners.store.output_files import NamedPath, OutputPathError, write_text

    path = tmp_path / "out"
    if kind == "a socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    else:
        try:
            os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(7, 0))
        except PermissionError:
            pytest.skip("mknod is not permitted here (not root, or a container without CAP_MKNOD)")
    before = _state(path)
    with pytest.raises(OutputPathError, match=f"--json {path} is {kind}, not a regular file"):
        write_text(NamedPath("--json", path), "{}")
    assert _state(path) == before and _listing(tmp_path) == ["out"]
    if kind == "a socket":
        server.close()


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o664])
def test_a_replaced_output_keeps_its_mode(tmp_path: Path, mode: int) -> None:
    db = tmp_path / "w.duckdb"
    assert main(["run", "--case", "empty_logs_gateway_timeout_t1", "--db", str(db), "--label", "w"]) == 0
    out = tmp_path / "whatif.json"
    out.write_text("old\n")
    out.chmod(mode)
    assert main(["whatif", "--db", str(db), "--label", "w", "--no-gain-threshold", "1", "--json", str(out)]) == 0
    assert out.read_text() != "old\n"
    assert stat.S_IMODE(out.stat().st_mode) == mode
