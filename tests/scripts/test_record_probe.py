"""The tag probe's recording script replays exactly what was recorded."""

from __future__ import annotations

from scripts.record_probe import replay_args


def _probes(args: list[str]) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == "--probe"]


def test_a_case_recorded_whole_beside_one_recorded_in_part_is_replayed_whole() -> None:
    points = {"a": [1, 2, 3], "b": [2, 4], "c": [1, 2]}
    recorded = {"a": [1, 2, 3], "b": [2]}  # c not recorded at all
    args = replay_args(recorded, points, ["--model", "m"])
    assert [args[i + 1] for i, a in enumerate(args) if a == "--case"] == ["a", "b"]
    assert _probes(args) == ["a:1", "a:2", "a:3", "b:2"]
    assert args[-2:] == ["--model", "m"]


def test_cases_recorded_whole_need_no_probe_names() -> None:
    points = {"a": [1, 2], "b": [3]}
    assert _probes(replay_args({"a": [1, 2], "b": [3]}, points, [])) == []
