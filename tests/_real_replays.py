"""Each committed real-model recording replayed once per test session, shared by every module that reads it.

Replaying a recording's sweep (`cassettes/<model>/summary.json`'s `sweep_args`, `--record-mode none`, no key) is
the same work in `test_real_models`, `test_capture` and `test_whatif`; it grows with every recording. The first
test asking for a model's replay builds it, under a file lock, into a folder that only this session's processes
share (the xdist workers' common run id, or this process's own temporary folder): never a replay left by another
session, whose code may have differed. The replay's label is the model's registry name, as `real-models` gives it.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from filelock import FileLock

from runners.cli import main
from runners.decisions.real_models import RecordedSummary
from runners.pipelines.real_probes import is_probe_summary

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = sorted(p.parent for p in (ROOT / "cassettes").glob("*/summary.json") if not is_probe_summary(p))
"""Every committed sweep recording's folder (a tag probe's recording is replayed by its own test)."""
PROBE_RECORDINGS = sorted(p.parent for p in (ROOT / "cassettes").glob("*/summary.json") if is_probe_summary(p))
"""Every committed tag-probe recording's folder."""


def summary_of(folder: Path) -> RecordedSummary:
    """The committed summary of the recording in `folder`."""
    return RecordedSummary.model_validate_json((folder / "summary.json").read_text())


def replay_argv(folder: Path, db: Path, label: str, sweep_args: Sequence[str] | None = None) -> list[str]:
    """The `harness-bench` arguments replaying the recording in `folder` offline into `db` under `label` (its sweep's
    flags, or `sweep_args` in their place)."""
    args = summary_of(folder).sweep_args if sweep_args is None else sweep_args
    return ["sweep", *args, "--cassettes", str(folder), "--record-mode", "none",
            "--db", str(db), "--label", label]  # fmt: skip


def _shared_folder(factory: pytest.TempPathFactory) -> Path:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    base = factory.getbasetemp()
    folder = base.parent / f"real-replays-{run}" if run else base / "real-replays"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def replayed(folder: Path, factory: pytest.TempPathFactory) -> Path:
    """The DuckDB file of the recording in `folder` replayed offline (built by the first caller of the session)."""
    summary = summary_of(folder)
    db = _shared_folder(factory) / f"{folder.name}.duckdb"
    with FileLock(f"{db}.lock"):
        if db.exists():
            return db
        part = db.with_name(f"{db.stem}.part.duckdb")
        part.unlink(missing_ok=True)
        argv = replay_argv(folder, part, summary.model)
        err = io.StringIO()
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stderr(err):
            mp.delenv("OPENAI_API_KEY", raising=False)  # a replay needs no key: none is sent
            code = main(argv)
        assert code == 0, f"{folder.name}: the replay failed:\n{err.getvalue()[-2000:]}"
        part.rename(db)
    return db
