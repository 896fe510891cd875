"""The outcome verdict holds a run to the fallback kind its case expects: the same FALLBACK released as another kind
fails it, for the scripted model and for a real model's outcome verdict alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runners.cli import main
from runners.domain.evalset import BUILTIN_DIR
from tests._db import open_read_only


@pytest.mark.parametrize(("expected", "passes"), [("INSUFFICIENT_EVIDENCE", True), ("MISSING_REQUIRED_CONTEXT", False)])
def test_a_fallback_of_another_kind_fails_the_outcome_verdict(tmp_path: Path, expected: str, passes: bool) -> None:
    doc = yaml.safe_load((BUILTIN_DIR / "empty_logs.yaml").read_text(encoding="utf-8"))
    case = next(c for c in doc["cases"] if c["id"] == "empty_logs_gateway_timeout_t1")
    case["expect"]["fallback_kind"] = expected  # the reference run releases FALLBACK / INSUFFICIENT_EVIDENCE
    path = tmp_path / "kinds.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}, allow_unicode=True), encoding="utf-8")
    db = tmp_path / "k.duckdb"
    assert main(["run", "--evalset", str(path), "--db", str(db)]) == 0
    con = open_read_only(db)
    ((outcome, kind, outcome_passed, passed),) = con.execute(
        "SELECT outcome, fallback_kind, outcome_passed, passed FROM case_runs"
    ).fetchall()
    con.close()
    assert (outcome, kind) == ("FALLBACK", "INSUFFICIENT_EVIDENCE")
    assert (outcome_passed, passed) == (passes, passes)
