"""The committed recording of the model judge (Qwen2.5-Coder 1.5B, `scripts/record_judge.sh`) re-judges offline to the
rates committed in `reports/judges/`: CI measures the model judge without a server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runners.cli import main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("labelled_set", ["dev", "held-out"])
def test_the_recorded_model_judge_replays_to_its_committed_rates(labelled_set: str, tmp_path: Path) -> None:
    out = tmp_path / "rates.json"
    assert main(["judge-check", "--answers", str(ROOT / "evalsets" / "judge" / f"{labelled_set}-model-subset.jsonl"),
                 "--judge", "rules", "--judge", "model", "--judge-model", "qwen2.5-coder-1.5b",
                 "--judge-cassettes", str(ROOT / "cassettes" / "judges"), "--json", str(out)]) == 0  # fmt: skip
    committed = json.loads((ROOT / "reports" / "judges" / f"{labelled_set}-model-subset.json").read_text())
    assert json.loads(out.read_text()) == committed
