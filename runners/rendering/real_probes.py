"""The real-models report's tag-probe section: every committed probe recording (`cassettes/<model>-probe/summary.json`,
its `probe_args`) replayed offline, checked against its summary, and shown per model — the confusion per truth grade
beside the trivial taggers, and the NO_GAIN threshold the measured tags imply beside the one the model's sweep
recommends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from runners.decisions.tag_probe import ModelProbe, ProbeMeasure, RecordedProbe
from runners.domain.model_spec import DEFAULT_API_KEY_ENV
from runners.rendering.tag_probe import probe_markdown

__all__ = ["PROBE_TEXT", "ProbeRecording", "ProbeReport", "find_probe_recordings", "is_probe_summary", "probe_lines",
           "replay_probe"]  # fmt: skip

PROBE_TEXT = (
    "A run judges an observation only where the model's own search took it, and both models draft right after their"
    " first non-empty observation, so the runs hold almost no gain tags. The tag probe asks for one on every non-empty"
    " observation of the reference trajectories: the conversation up to and including that observation (the"
    " reference's calls, the real tools, envelope and prompt, through the Harness) and one model call; the tag its"
    " envelope carries is scored against the observation's truth grade (docs/evaluation-cases.md), a Draft instead of"
    " a call is counted apart. Beside it, the trivial taggers on the same observations, and the NO_GAIN threshold the"
    " measured rate of NO_GAIN on evidence implies (the smallest T with rate^T below 5%)."
)
"""The section's introduction."""


class ProbeRecording(BaseModel):
    """A committed probe recording: its folder and summary."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    folder: Path
    """The folder holding the cassettes and summary.json."""
    summary: RecordedProbe
    """The committed summary."""


class ProbeReport(BaseModel):
    """One model's probe in the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """The registry name of the model."""
    folder: str
    """The recording's folder name."""
    cases: int
    """Cases with a recorded probe."""
    measured: ModelProbe
    """What the replay measured."""
    swept: str | None
    """What the model's sweep recommends (`no_gain_threshold=2`), None without a recommendation."""


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


def replay_probe(recording: ProbeRecording, db: Path) -> ModelProbe:
    """Replay the recorded probe offline (`--record-mode none`, no key) into `db` under the model's name."""
    s = recording.summary
    with tempfile.TemporaryDirectory(prefix="hb-probe-") as tmp:
        out = Path(tmp) / "probe.json"
        argv = [sys.executable, "-m", "runners.cli", "tag-probe", *s.probe_args, "--cassettes",
                str(recording.folder), "--record-mode", "none", "--db", str(db), "--label", f"{s.model}-probe",
                "--json", str(out)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != DEFAULT_API_KEY_ENV}
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"]
            raise ValueError(f"{recording.folder / 'summary.json'}: its probe did not replay ({lines[-1].strip()})")
        measured = ProbeMeasure.model_validate_json(out.read_bytes()).models[0]
    return measured.model_copy(update={"model": s.model, "bench_run_id": None})


def probe_lines(p: ProbeReport) -> list[str]:
    """One model's probe section as Markdown lines (the caller escapes nothing: every text here is the bench's)."""
    lines = [f"### {p.model} ({p.cases} cases, `cassettes/{p.folder}`)", "", *probe_markdown(p.measured), ""]
    t = p.measured.threshold
    implied = "none" if t.threshold is None else str(t.threshold)
    lines.append(f"Beside the sweep: the tags imply NO_GAIN {implied}"
                 + (f" (cautious: {t.threshold_upper})" if t.threshold_upper not in (None, t.threshold) else "")
                 + f"; the recorded sweep recommends {p.swept or 'nothing'}.")  # fmt: skip
    return lines
