"""`make phoenix` (`scripts.phoenix`): the Phoenix venv is installed once per set of pins, a stamp makes the next call
a no-op, other pins reinstall it from scratch, and a failed step names its log and leaves no stamp. pip and venv are
stood in for (no network): each step is recorded, and the venv step lays out the executable pip would install."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import scripts.phoenix as phoenix


class FakeSteps:
    """Stands in for subprocess.run: records each command; `fail` names a step (by a word of it) that exits 1."""

    def __init__(self, folder: Path, fail: str | None = None) -> None:
        self.folder = folder
        self.fail = fail
        self.commands: list[list[str]] = []

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        self.commands.append(cmd)
        if self.fail and self.fail in cmd:
            kwargs["stdout"].write(b"ERROR: no matching distribution\n")
            return subprocess.CompletedProcess(cmd, 1)
        if cmd[1:3] == ["-m", "venv"]:
            (self.folder / "venv" / "bin").mkdir(parents=True)
        if phoenix.PHOENIX in cmd:
            (self.folder / "venv" / "bin" / "phoenix").write_text("#!/bin/sh\n")
        return subprocess.CompletedProcess(cmd, 0)


def test_installed_once_then_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = FakeSteps(tmp_path)
    monkeypatch.setattr(subprocess, "run", steps)
    assert phoenix.installed(tmp_path) is None
    exe = phoenix.ensure_phoenix(tmp_path)
    assert exe == tmp_path / "venv" / "bin" / "phoenix" and phoenix.installed(tmp_path) == exe
    venv, pip, server = steps.commands
    assert venv[1:] == ["-m", "venv", str(tmp_path / "venv")]
    assert pip[-1] == phoenix.PIP
    assert server[-3:] == ["-c", str(phoenix.CONSTRAINTS), phoenix.PHOENIX]  # every version from the pins
    assert phoenix.ensure_phoenix(tmp_path) == exe
    assert len(steps.commands) == 3, "the stamp makes the second call a no-op"


def test_other_pins_reinstall_from_a_clean_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", FakeSteps(tmp_path))
    phoenix.ensure_phoenix(tmp_path)
    leftover = tmp_path / "venv" / "lib" / "old-package"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("")
    monkeypatch.setattr(phoenix, "PHOENIX", "arize-phoenix==0.0.1")  # another pin: another key
    assert phoenix.installed(tmp_path) is None
    steps = FakeSteps(tmp_path)
    monkeypatch.setattr(subprocess, "run", steps)
    phoenix.ensure_phoenix(tmp_path)
    assert len(steps.commands) == 3 and not leftover.exists()
    assert [p.name for p in (tmp_path / "venv").glob(".installed-*")] == [f".installed-{phoenix.install_key()}"]


def test_a_failed_step_names_its_log_and_leaves_no_stamp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", FakeSteps(tmp_path, fail=phoenix.PHOENIX))
    failed = r"pip install arize-phoenix==.* failed \(exit 1\); see .*install\.log"
    with pytest.raises(phoenix.SetupError, match=failed):
        phoenix.ensure_phoenix(tmp_path)
    assert phoenix.installed(tmp_path) is None
    assert "no matching distribution" in (tmp_path / "install.log").read_text()


def test_main_exits_1_with_one_line_when_the_install_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_BENCH_PHOENIX_DIR", str(tmp_path))
    monkeypatch.setattr(subprocess, "run", FakeSteps(tmp_path, fail="venv"))
    assert phoenix.main([]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("make phoenix: python -m venv failed")
    assert phoenix.main(["--now"]) == 2
