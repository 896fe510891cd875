"""A disk that fills during a run: the run stops, is recorded `interrupted` (never `completed` with rows
missing), the exit code says so (74), and `--resume` completes it once there is room — on a real small
filesystem (a tmpfs this test mounts; it needs root and the mount(8) command)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runners.cli import main
from tests._db import open_read_only

ROOT = Path(__file__).resolve().parents[2]
EXIT_STORAGE = 74


def _mount(where: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` at `where`; the reason it cannot be done, or None."""
    if shutil.which("mount") is None:
        return "no mount command on this machine"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return None if proc.returncode == 0 else f"mount -t tmpfs failed: {proc.stderr.strip()}"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    why = _mount(disk, "1800k")
    if why is not None:
        pytest.skip(f"cannot make a small filesystem: {why}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runners.cli", *argv], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"},
    )  # fmt: skip


def _rows(db: Path) -> tuple[list[tuple[object, ...]], int]:
    con = open_read_only(db)
    try:
        runs = con.execute("SELECT status, planned_case_runs FROM bench_runs").fetchall()
        (stored,) = con.execute("SELECT count(DISTINCT case_run_id) FROM case_runs").fetchone() or (0,)
        return runs, int(stored)
    finally:
        con.close()


@pytest.fixture
def disk_for_a_few_flushes(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs with room for a database that has stored one case run, plus 1 MB: the run below starts, commits
    some case runs and fills it most of the way (sized from a probe run, since DuckDB's block layout sets the floor;
    the probe only sizes the disk, so it runs in process)."""
    probe = tmp_path / "probe"
    probe.mkdir()
    assert main(["run", "--db", str(probe / "p.duckdb"), "--case", "empty_logs_gateway_timeout_t1"]) == 0
    base_kib = (probe / "p.duckdb").stat().st_size // 1024
    disk = tmp_path / "disk"
    why = _mount(disk, f"{base_kib + 1024}k")
    if why is not None:
        pytest.skip(f"cannot make a small filesystem: {why}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_disk_that_fills_during_a_run_interrupts_it_and_resume_completes_it(disk_for_a_few_flushes: Path) -> None:
    small_disk = disk_for_a_few_flushes
    db = small_disk / "bench.duckdb"
    # 318 case runs planned (3 epochs of 106 cases): the disk fills after about 240 (measured 2026-12-06: 239 to 242;
    # the database grows in steps, so 212 case runs fit in even 256 KiB more and 2 epochs would never fill it), and
    # the resume completes the rest (5 epochs with 1.5 MB of room filled it after 286 and left 244 to the resume)
    first = _cli(small_disk.parent, "run", "--db", str(db), "--epochs", "3")
    assert first.returncode == EXIT_STORAGE, first.stdout[-1500:] + first.stderr[-1500:]
    assert "No space left on device" in first.stderr and "interrupted" in first.stderr
    resume = next(line.strip() for line in first.stderr.splitlines() if "--resume" in line)
    ((status, planned),), stored = _rows(db)
    assert status == "interrupted", "never `completed` with rows missing"
    assert 0 < stored < int(str(planned)), f"{stored} of {planned} stored"

    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    argv = shlex.split(resume)
    assert argv[:2] == ["harness-bench", "run"]
    second = _cli(small_disk.parent, *argv[1:])
    assert second.returncode == 0, second.stderr[-2000:]
    ((status, planned),), stored = _rows(db)
    assert (status, stored) == ("completed", planned)


def test_no_room_to_start_a_run_is_exit_74_with_nothing_started(small_disk: Path) -> None:
    filler = small_disk / "filler"
    with filler.open("wb") as f:  # leave almost nothing
        try:
            f.write(b"\0" * (2 * 1024 * 1024))
        except OSError:
            pass
    proc = _cli(small_disk.parent, "run", "--db", str(small_disk / "b.duckdb"), "--evalset", "missing_context")
    assert proc.returncode == EXIT_STORAGE, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was started" in lines[0] and "No space left on device" in lines[0], lines


@pytest.mark.parametrize("room_kib", [8, 16])
def test_no_room_for_the_schema_leaves_no_file(small_disk: Path, room_kib: int) -> None:
    """Room to create the file but not to commit its schema: exit 74, and no schema-less file left behind."""
    filler = small_disk / "filler"
    with filler.open("wb") as f:
        try:
            f.write(b"\0" * (1800 * 1024 - room_kib * 1024))
        except OSError:
            pass
    proc = _cli(small_disk.parent, "run", "--db", str(small_disk / "b.duckdb"), "--evalset", "missing_context")
    assert proc.returncode == EXIT_STORAGE, proc.stderr[-2000:]
    assert "nothing was started" in proc.stderr
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"], "a database without its schema was left"
