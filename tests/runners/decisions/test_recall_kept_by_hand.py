"""`recall kept` — the figure the README's stop-rule table rests on — against a hand computation: under `no-gain:1`, a
rewriter run that never saw a NO_GAIN is unchanged and keeps its verdict; one that did is cut at its first NO_GAIN and
its Draft after STOP_REQUIRED was never recorded, so it is not known to be kept (counted only in "at most")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from runners.cli import main
from tests._db import open_read_only


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    folder = tmp_path_factory.mktemp("recall-kept")
    db, out = folder / "rw.duckdb", folder / "cs.json"
    assert main(["run", "--model", "scripted:rewriter", "--evalset", "diagnosable", "--no-gain-threshold", "4",
                 "--db", str(db), "--label", "rw"]) == 0  # fmt: skip
    assert main(["compare-stops", "--db", str(db), "--label", "rw", "--policy", "no-gain:1", "--json", str(out)]) == 0
    return db, json.loads(out.read_text())["policies"][0]


def test_recall_kept_counts_only_runs_known_to_keep_their_verdict(compared: tuple[Path, dict[str, object]]) -> None:
    db, policy = compared
    con = open_read_only(db)
    rows = con.execute(
        "SELECT outcome_passed, no_gain_count FROM case_runs WHERE expected_outcome = 'SUCCESS' ORDER BY case_id"
    ).fetchall()
    con.close()
    kept = np.array([float(bool(passed) and not no_gain) for passed, no_gain in rows])
    unknown = sum(1 for _, no_gain in rows if no_gain)
    assert 0 < unknown < len(rows), "the case bites: some runs are cut, some are not"
    recall_kept = policy["recall_kept"]
    assert isinstance(recall_kept, dict)
    assert recall_kept["mean"] == pytest.approx(kept.mean())
    half = stats.t.ppf(0.975, len(kept) - 1) * kept.std(ddof=1) / np.sqrt(len(kept))
    assert (recall_kept["low"], recall_kept["high"]) == pytest.approx((kept.mean() - half, kept.mean() + half))
    at_most = (kept.sum() + sum(1 for passed, no_gain in rows if no_gain)) / len(rows)
    assert policy["recall_at_most"] == pytest.approx(at_most)
    assert policy["recall_at_most"] > recall_kept["mean"], "unknown runs are never counted as kept"
