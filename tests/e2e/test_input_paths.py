"""The input-path rule: a file a command reads that is a FIFO, a device, a folder or too large is refused with one
line naming the flag and what it is, exit 2, at once (a FIFO would block the read, /dev/zero never end it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runners.cli import main
from runners.domain.input_files import InputPathError, check_input_path


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "runners.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=10, env=env, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("what", ["zero", "urandom", "fifo"])
def test_capture_of_a_device_or_a_fifo_is_refused_at_once(tmp_path: Path, fifo: Path, what: str) -> None:
    trace = fifo if what == "fifo" else Path(f"/dev/{what}")
    done = _cli("capture", "--trace", str(trace), "--run", "r", "--out", str(tmp_path / "c.yaml"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    kind = "a FIFO (named pipe)" if what == "fifo" else "a character device"
    assert f"--trace {trace} is {kind}" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c.yaml").exists()


def test_run_on_an_evalset_that_is_a_fifo_names_the_fifo(tmp_path: Path, fifo: Path) -> None:
    done = _cli("run", "--evalset", str(fifo), "--db", str(tmp_path / "x.duckdb"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "is a FIFO (named pipe)" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.duckdb").exists()


def test_a_mistyped_family_is_suggested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--evalset", "empty_log", "--db", str(tmp_path / "x.duckdb")]) == 2
    assert "did you mean 'empty_logs'?" in capsys.readouterr().err


def test_too_large_an_input_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:
        f.truncate(2_000)  # sparse: no bytes written
    with pytest.raises(InputPathError, match=r"--trace .* is 2,000 bytes, over the 1,000 an input may be"):
        check_input_path("--trace", big, max_bytes=1_000)
    with pytest.raises(InputPathError, match="no such file"):
        check_input_path("--trace", tmp_path / "nope", max_bytes=1_000)
    with pytest.raises(InputPathError, match="is a folder"):
        check_input_path("--trace", tmp_path, max_bytes=1_000)
    check_input_path("--trace", tmp_path, max_bytes=1_000, folder_ok=True)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["report", "--out"], "--out"), (["real-models", "--out"], "--out"), (["export", "--inspect"], "--inspect")],
)
@pytest.mark.parametrize("target", ["/dev/full", "fifo"])
def test_a_folder_output_given_a_device_or_a_fifo_names_it(
    argv: list[str], flag: str, target: str, fifo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(fifo) if target == "fifo" else target
    db = ["--db", str(tmp_path / "none.duckdb")] if argv[0] != "real-models" else []
    assert main([*argv, path, *db]) == 2
    err = capsys.readouterr().err
    kind = "a FIFO (named pipe)" if target == "fifo" else "a character device"
    assert f"{flag} {path} is {kind}; give a folder" in err and "is a file" not in err, err
