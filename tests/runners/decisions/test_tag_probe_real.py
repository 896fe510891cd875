"""Every committed tag-probe recording of a real model replays offline and yields exactly its committed summary.

`cassettes/<model>-probe/summary.json` holds the `harness-bench tag-probe` flags that replay the recording
(`probe_args`) and what the replay measured: every probe's answer, the confusion per truth grade, the baselines and
the implied threshold. The test replays it from the cassettes with the network blocked (`--record-mode none`, no key,
no server): a change to the probe, the truth grades or the Harness's model-facing text fails with the differing
numbers (a changed request is a cassette miss: the probe is not answered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.cli import main
from runners.decisions.tag_probe import ProbeMeasure, RecordedProbe
from tests._real_replays import PROBE_RECORDINGS


@pytest.mark.parametrize("folder", PROBE_RECORDINGS, ids=[p.name for p in PROBE_RECORDINGS])
def test_a_probe_recording_replays_to_its_summary(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    committed = RecordedProbe.model_validate_json((folder / "summary.json").read_bytes())
    out = tmp_path / "probe.json"
    argv = ["tag-probe", *committed.probe_args, "--cassettes", str(folder), "--record-mode", "none",
            "--db", str(tmp_path / "replay.duckdb"), "--label", committed.model, "--json", str(out)]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    got = ProbeMeasure.model_validate_json(out.read_bytes()).models[0]
    assert got.model_copy(update={"bench_run_id": None}) == committed.measured.model_copy(update={"bench_run_id": None})
    assert not got.unjudged.get("NO_ANSWER"), "a probe found no recorded answer"
    assert folder.name == f"{committed.model}-probe" and committed.model in {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}


def test_there_are_probe_recordings() -> None:
    assert PROBE_RECORDINGS, "no cassettes/<model>-probe/summary.json committed"
