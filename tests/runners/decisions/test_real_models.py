"""Every committed recording of a real model replays offline and yields exactly its committed summary.

`cassettes/<model>/summary.json` holds what the recorded sweep yielded per NO_GAIN threshold (pass counts per
family, outcomes, stop reasons, violations and rejections by kind, STOP_REQUIRED deliveries and what followed,
duplicates stopped, tokens, model calls) and the sweep's flags. The test replays the sweep from the cassettes
with the network blocked (`--record-mode none`, no key, no server) and compares: a code change that alters what a
real model's recorded run yields fails with the differing numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runners.cli import main
from runners.decisions.real_models import RecordedSummary, summarize
from runners.pipelines.real_models import differences
from runners.store.recorded_sweeps import read_recorded
from tests._real_replays import RECORDINGS, replay_argv, replayed, summary_of


def _one_case(sweep_args: tuple[str, ...], case: str) -> list[str]:
    """The recording's sweep flags with its `--case` flags replaced by `case` alone."""
    args, kept = list(sweep_args), []
    while args:
        flag = args.pop(0)
        if flag == "--case":
            args.pop(0)
        else:
            kept.append(flag)
    return ["--case", case, *kept]


def _replay_case(folder: Path, case: str, db: Path, capsys: pytest.CaptureFixture[str]) -> RecordedSummary:
    """The summary of the recording's sweep replayed (`replay_argv`, the same `sweep` every replay runs) on `case`
    alone."""
    committed = summary_of(folder)
    args = _one_case(committed.sweep_args, case)
    code = main(replay_argv(folder, db, "replay", sweep_args=args))
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    return summarize(committed.model, read_recorded(db, "replay"), args)


@pytest.mark.parametrize("folder", RECORDINGS, ids=[p.name for p in RECORDINGS])
def test_a_real_model_recording_replays_to_its_summary(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The session's one replay of the recording (`tests/_real_replays.py`: the same `sweep` as `_replay`)."""
    committed = summary_of(folder)
    db = replayed(folder, tmp_path_factory)
    got = summarize(committed.model, read_recorded(db, committed.model), committed.sweep_args)
    assert differences(committed, got) == [], "the recorded run's numbers changed"


def test_there_are_real_model_recordings() -> None:
    assert RECORDINGS, "no cassettes/<model>/summary.json committed"


def _is_a_call(content: object) -> bool:
    """A reply whose text is one JSON call object (a call written as text, however it is spaced)."""
    try:
        parsed = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return False
    return isinstance(parsed, dict) and "name" in parsed and "arguments" in parsed


def test_changing_one_recorded_answer_changes_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay reads the cassettes' answers: one answer changed, the summary changes. Only the changed cassette's
    case is replayed, from the committed cassettes and from the changed copy: the other cases' runs read cassettes
    that are the same in both, so they could only add the same rows to both summaries."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    folder = tmp_path / RECORDINGS[0].name
    shutil.copytree(RECORDINGS[0], folder)
    # the first recorded reply of the first cassette that called a tool (natively or as text) becomes a Draft
    # with a null conclusion: the run ends there, with no further request to miss
    for cassette in sorted(folder.rglob("epoch*.json")):
        data = json.loads(cassette.read_text())
        first = data["interactions"][0]
        body = json.loads(first["response"]["body"]["string"])
        message = body["choices"][0]["message"]
        if message.get("tool_calls") or _is_a_call(message.get("content")):
            body["choices"][0]["message"] = {"role": "assistant", "content": json.dumps({"conclusion": None})}
            body["choices"][0]["finish_reason"] = "stop"
            first["response"]["body"]["string"] = json.dumps(body)
            cassette.write_text(json.dumps(data))
            break
    else:
        pytest.fail("no recorded first reply that calls a tool")
    case = cassette.parent.name  # <cassettes>/<model>/<case>/epoch<N>.json
    assert case in summary_of(folder).sweep_args
    as_recorded = _replay_case(RECORDINGS[0], case, tmp_path / "recorded.duckdb", capsys)
    changed = _replay_case(folder, case, tmp_path / "changed.duckdb", capsys)
    assert as_recorded.cases == changed.cases == 1
    assert changed.model_dump() != as_recorded.model_dump()
