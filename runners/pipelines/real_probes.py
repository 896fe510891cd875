"""The committed tag-probe recordings (`cassettes/<model>-probe/summary.json`, its `probe_args`): found, replayed
offline in this process (`--record-mode none`: no server, no key) through the probe's bench run, and measured — what
the real-models report's tag-probe section shows and `tests/runners/decisions/test_tag_probe_real.py` checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from runners.decisions.tag_probe import ModelProbe, RecordedProbe, measure_probes
from runners.plan.run_plan import RunPlan

__all__ = ["PlanOf", "ProbeRecording", "find_probe_recordings", "is_probe_summary", "replay_probe"]


class ProbeRecording(BaseModel):
    """A committed probe recording: its folder and summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: Path
    """The folder holding the cassettes and summary.json."""
    summary: RecordedProbe
    """The committed summary."""


PlanOf = Callable[[ProbeRecording, Path], tuple[RunPlan, frozenset[tuple[str, int]] | None]]
"""How a recording's `probe_args` become the plan (and `--probe` points) that replay it into a database (the
tag-probe command's parser)."""


def is_probe_summary(path: Path) -> bool:
    """Whether a `summary.json` is a tag probe's (it holds `probe_args`), not a sweep's."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "probe_args" in data


def find_probe_recordings(cassettes: Path) -> list[ProbeRecording]:
    """Every committed probe recording under `cassettes`; ValueError names an unusable summary."""
    found = []
    for path in sorted(cassettes.glob("*/summary.json")):
        if not is_probe_summary(path):
            continue
        try:
            summary = RecordedProbe.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the file"
            raise ValueError(f"{path}: not a recorded probe ({where}: {first['msg']})") from None
        found.append(ProbeRecording(folder=path.parent, summary=summary))
    return found


def replay_probe(recording: ProbeRecording, db: Path, plan_of: PlanOf) -> ModelProbe:
    """Replay the recorded probe offline into `db`, in this process; what it measured (under the model's name)."""
    from runners.run.probe_bench import run_probes
    from runners.store.connection import connect
    from runners.store.tag_probes import stored_probes

    plan, only = plan_of(recording, db)
    done = run_probes(plan, only=only)
    con = connect(db, read_only=True)
    try:
        rows = stored_probes(con, done.bench_run_id)
    finally:
        con.close()
    return measure_probes(recording.summary.model, rows)
