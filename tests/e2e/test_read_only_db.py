"""A new `--db` on a read-only file system (run, sweep, import): one line that says the folder cannot be written,
exit 2 — never a traceback, never "free some space". The file system's answers are the ones a read-only mount gives
(DuckDB cannot create the file; even removing what is not there is refused)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import duckdb
import pytest

from runners.cli import main
from runners.store import connection

CASE = "empty_logs_gateway_timeout_t1"


@pytest.fixture
def read_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "ro"
    folder.mkdir()
    real_attach, real_unlink = connection.attach, Path.unlink

    def attach(database: str, *, read_only: bool) -> Any:
        if str(database).startswith(str(folder)):
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": Read-only file system')
        return real_attach(database, read_only=read_only)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if str(self).startswith(str(folder)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(connection, "attach", attach)
    monkeypatch.setattr(Path, "unlink", unlink)
    return folder


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trace")
    assert main(["run", "--case", CASE, "--db", str(folder / "t.duckdb")]) == 0
    assert main(["export", "--db", str(folder / "t.duckdb"), "--otel", str(folder / "o.jsonl")]) == 0
    return folder / "o.jsonl"


@pytest.mark.parametrize("command", ["run", "sweep", "import"])
def test_a_new_db_on_a_read_only_file_system_is_one_line(
    command: str, read_only: Path, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(read_only / "x.duckdb")
    argv = {"run": ["run", "--case", CASE, "--db", db], "sweep": ["sweep", "--case", CASE, "--db", db],
            "import": ["import", str(trace), "--db", db, "--label", "imp"]}[command]  # fmt: skip
    capsys.readouterr()
    assert main(argv) in (2, 74)
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "cannot be written here: choose another --db" in err and "free some space" not in err
