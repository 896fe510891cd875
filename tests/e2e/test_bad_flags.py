"""Every bad flag and path is exit 2 with one line naming it, before any file is created or changed.
Table-driven over the real CLI, in a folder holding a metrics database, a SQLite
database, a garbage file, a text file and a folder."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from runners.cli import main
from runners.store import connection
from runners.store.connection import connect

ROOT = Path(__file__).resolve().parents[2]

# (argv with {placeholders}, what the one stderr line must name)
CASES: list[tuple[str, str]] = [
    # budgets and counts: bounds of the declaration and of the storage types
    ("run --max-tool-calls 10000000000000000000000", "--max-tool-calls 10000000000000000000000"),
    ("run --max-tokens 99999999999999999999", "--max-tokens 99999999999999999999"),
    ("run --no-gain-threshold 0", "--no-gain-threshold 0"),
    ("run --deadline 1e12", "--deadline 1e12"),
    ("run --deadline nan", "--deadline nan"),
    ("run --epochs 0", "--epochs 0"),
    ("run --epochs 100000", "--epochs 100000"),
    ("run --concurrency 0", "--concurrency 0"),
    ("run --temperature 5", "--temperature 5"),
    ("run --parallel-tool-calls maybe", "--parallel-tool-calls 'maybe'"),
    ("run --schema-mode loose", "--schema-mode 'loose'"),
    ("run --model gpt-4", "--model 'gpt-4'"),
    ("run --evalset no_such_family", "no_such_family"),
    ("run --case no_such_case", "no_such_case"),
    # dangling and conflicting flags
    ("run --record-mode once", "--record-mode"),
    ("run --cassettes {folder}", "--cassettes"),
    ("run --tool-choice kb_search", "--tool-choice"),
    ("run --base-url http://127.0.0.1:9/v1", "--base-url"),
    ("run --model openai:m --base-url http://127.0.0.1:9/v1 --tool-choice sql_search", "--tool-choice 'sql_search'"),
    ("run --db {metrics} --resume br-x --max-tool-calls 3", "--max-tool-invocations"),
    ("run --db {metrics} --resume br-x --epochs 2", "--epochs"),
    ("report --db {metrics} --sweep sw-a --bench-run br-b", "--bench-run"),
    # user text is never markup
    ("run --db {metrics} --resume [/x]", "[/x]"),
    ("sweep --db {metrics} --resume [/x]", "[/x]"),
    ("report --db {metrics} --bench-run [/x]", "[/x]"),
    ("recommend --db {metrics} --sweep [bold]x", "[bold]x"),
    # database paths: recognised from the header, never opened by DuckDB
    ("run --db {sqlite}", "{sqlite} is a SQLite database"),
    ("report --db {sqlite}", "{sqlite} is a SQLite database"),
    ("recommend --db {sqlite}", "{sqlite} is a SQLite database"),
    ("gate --db {sqlite} --baseline a --candidate b", "{sqlite} is a SQLite database"),
    ("run --db {garbage}", "{garbage} is not a DuckDB database file"),
    ("run --db {text}", "{text} is not a DuckDB database file"),
    ("run --db {folder}", "{folder} is a folder"),
    ("run --db {tmp}/missing/x.duckdb", "folder {tmp}/missing does not exist"),
    ("run --resume br-x", "bench.duckdb: no such DuckDB file"),
    ("report --db {tmp}/nope.duckdb", "nope.duckdb: no such DuckDB file"),
    # sweep: validated before the sweep row (or the file) exists
    ("sweep --db {metrics} --epochs 0", "--epochs 0"),
    ("sweep --no-gain-threshold 1,x", "--no-gain-threshold '1,x'"),
    ("sweep --max-tool-calls ,", "--max-tool-calls ','"),
    ("sweep --db {metrics} --no-gain-threshold 0,1", "--no-gain-threshold '0,1'"),
    ("sweep --max-tokens 1,99999999999999999999", "--max-tokens"),
    ("sweep --schema-mode adaptive,loose", "--schema-mode 'adaptive,loose'"),
    ("sweep --evalset no_such_family", "no_such_family"),
    # output paths and ports
    ("report --db {metrics} --out {text}", "--out {text} is a file"),
    ("gate --db {metrics} --baseline a --candidate b --summary {folder}", "--summary {folder} is a folder"),
    ("gate --db {metrics} --baseline a --candidate b --junit {text}/j.xml", "--junit {text}/j.xml"),
    ("serve-sim --port 70000", "--port 70000"),
    ("serve-sim --port -1", "--port -1"),
    ("cases --evalset {tmp}/none.yaml", "none.yaml"),
    # behaviour-profile parameters: ranges and duplicates
    ("run --model scripted:rewriter?k=-1", "k=-1 must be a whole number"),
    ("run --model scripted:rewriter?k=2.5", "k=2.5 must be a whole number"),
    ("run --model scripted:sloppy?p=0.1&p=0.9", "parameter p given twice"),
    ("run --model scripted:sloppy?p=nan", "p=nan must be within [0, 1]"),
    # replay and endpoints: refused before any folder or database exists
    ("run --model openai:m --cassettes {tmp}/no-such --api-key-env PATH", "--cassettes {tmp}/no-such: no such folder"),
    ("sweep --model openai:m --cassettes {tmp}/no-such --api-key-env PATH", "--cassettes {tmp}/no-such: no such"),
    ("gate --db {metrics} --baseline a --candidate b --bench-run x --bench-run y --bench-run z", "--bench-run"),
    ("migrate --db {tmp}/none.duckdb", "none.duckdb: no such DuckDB file"),
    # values that look like options, hosts, long or multi-line text
    ("sweep --protocol-violation-threshold -1,2", "--protocol-violation-threshold '-1,2': -1: must be an integer ≥ 1"),
    ("serve-sim --host 256.1.1.1 --port 0", "--host 256.1.1.1: cannot listen there"),
    ("run --label a\nb", "--label 'a\\nb': a label is 1-200 letters, digits, spaces or '._-:/+@='"),
    # a label is an allowlist like the run id: no markup, no control or bidi character, on every command
    ("run --label <img/src=x/onerror=alert(1)>", "--label '<img/src=x/onerror=alert(1)>': a label is 1-200"),
    ("sweep --label a\u202eb", "--label 'a\\u202eb': a label is 1-200"),
    ("gate --db {metrics} --baseline a --candidate b\x1b[2J", "--candidate 'b\\x1b[2J': a label is 1-200"),
    ("show --db {metrics} --label a`b --case x", "--label 'a`b': a label is 1-200"),
    ("export --db {metrics} --inspect {tmp}/x --label [a](b)", "--label '[a](b)': a label is 1-200"),
    ("run --run-id " + "x" * 5000 + "/", "(5001 characters)"),
]


def _world(tmp: Path) -> dict[str, str]:
    paths = {
        "tmp": tmp, "metrics": tmp / "metrics.duckdb", "sqlite": tmp / "app.sqlite", "garbage": tmp / "garbage.bin",
        "text": tmp / "notes.txt", "folder": tmp / "folder",
    }  # fmt: skip
    connect(paths["metrics"]).close()
    lite = sqlite3.connect(paths["sqlite"])
    lite.execute("CREATE TABLE customers (id INTEGER)")
    lite.commit()
    lite.close()
    paths["garbage"].write_bytes(bytes(range(256)) * 8)
    paths["text"].write_text("not a database\n")
    paths["folder"].mkdir()
    return {k: str(v) for k, v in paths.items()}


def _snapshot(root: Path) -> dict[str, tuple[bool, int, int]]:
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(("template", "needle"), CASES, ids=[c[0] for c in CASES])
def test_bad_flag_or_path_is_one_line_exit_2_and_touches_nothing(
    template: str, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world = _world(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def opened(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"DuckDB opened {args[0] if args else ''} (it could try to download an extension)")

    if "{sqlite}" in template or "{garbage}" in template or "{text}" in template.split("--db ")[-1]:
        monkeypatch.setattr(duckdb, "connect", opened)
        monkeypatch.setattr(connection, "attach", opened)  # the store attaches files to its one instance
    before = _snapshot(tmp_path)
    capsys.readouterr()
    assert main(template.format(**world).split(" ")) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert needle.format(**world) in lines[0]
    assert captured.out == ""
    assert _snapshot(tmp_path) == before, "nothing created or changed"


def test_a_long_value_is_not_echoed_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--run-id", "x" * 5000 + "/"]) == 2
    assert len(capsys.readouterr().err) < 400


def test_an_ascii_only_terminal_still_lists_the_cases(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "cases", "--evalset", "missing_context"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii", "COLUMNS": "80"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "missing_context" in proc.stdout


def test_a_real_process_exits_2_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "runners.cli", "run", "--max-tokens", "3000000000000000000000"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --max-tokens 3000000000000000000000: must be an integer ≥ 1 and ≤ 9223372036854775807"
        " (see harness-bench run --help)"
    ]
    assert list(tmp_path.iterdir()) == []
