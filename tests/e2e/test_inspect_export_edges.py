"""`export --inspect`: a folder whose name holds an escape sequence is printed inert; a full disk while a log is
written is one line naming it, no traceback, no partial log."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from runners.cli import main


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Imported here, not at collection: Inspect AI takes a second to import, and every worker collects this module.
    pytest.importorskip("inspect_ai.log")
    path = tmp_path_factory.mktemp("inspect-edges") / "t.duckdb"
    assert main(["run", "--case", "empty_logs_gateway_timeout_t1", "--db", str(path)]) == 0
    return path


def test_a_folder_name_with_an_escape_sequence_is_printed_inert(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "x\x1b[2Jred"
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J" in out
    assert list(folder.glob("*.eval"))


def test_a_full_disk_is_one_line_and_no_log(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(log: Any, location: str, *args: Any, **kwargs: Any) -> None:
        Path(location).write_bytes(b"PK\x03\x04 half")  # what a write cut short leaves
        raise OSError(errno.ENOSPC, "No space left on device", location)

    monkeypatch.setattr(pytest.importorskip("inspect_ai.log"), "write_eval_log", full)
    folder = tmp_path / "logs"
    capsys.readouterr()
    assert main(["export", "--db", str(db), "--inspect", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "No space left" in err, err
    assert not list(folder.glob("*")) if folder.exists() else True
