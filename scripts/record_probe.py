"""Record a real model's tag probe into cassettes, resumably, and write its summary (a developer tool).

    python -m scripts.record_probe --model qwen2.5-coder-0.5b --base-url http://127.0.0.1:8081/v1 [--out DIR]
    python -m scripts.record_probe --model qwen2.5-coder-0.5b --summary-only

Probes every case with a reference trajectory (record mode `once`: a probe whose cassette exists is replayed, so a
stopped recording continues where it was) into `DIR/live.duckdb` (not committed), then replays offline (no server,
no key) the cases whose every probe is recorded and writes `DIR/summary.json` from that replay: the `probe_args`
that replay it and what it measured — what `make test` replays against. `--summary-only` rewrites the summary from
the cassettes alone (while a recording is still under way, from the cases it finished). The model's request
settings come from the registry (`runners/live/models.py`); the server is yours to start
(`harness-bench serve-model NAME --port P`). Commit `DIR` (without `live.duckdb`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from runners.decisions.tag_probe import ProbeMeasure, RecordedProbe
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.run.tag_probe import probe_points
from runners.store.cassettes import probe_cassette_path
from scripts.record_real import sweep_flags

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "runners.cli"]


def probe_flags(model: str) -> list[str]:
    """The registry's request settings, generous timeouts, the default NO_GAIN threshold (the reference's)."""
    flags = sweep_flags(model, "native", "2")
    at = flags.index("--no-gain-threshold")
    return flags[:at] + flags[at + 2 :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a registered model (runners/live/models.py)")
    parser.add_argument("--base-url", help="the model server, e.g. http://127.0.0.1:8081/v1")
    parser.add_argument("--out", type=Path, default=None, help="default cassettes/MODEL-probe")
    parser.add_argument("--summary-only", action="store_true", help="rewrite summary.json from the cassettes")
    args = parser.parse_args(argv)
    out: Path = args.out or ROOT / "cassettes" / f"{args.model}-probe"
    out.mkdir(parents=True, exist_ok=True)
    points = {c.id: [p.step for p in probe_points(c)] for c in load_cases([str(BUILTIN_DIR)])}
    wanted = [case for case, steps in points.items() if steps]
    flags = probe_flags(args.model)
    if not args.summary_only:
        if not args.base_url:
            parser.error("--base-url is required to record")
        command = [*CLI, "tag-probe", *flags, "--base-url", args.base_url, "--cassettes", str(out),
                   "--record-mode", "once", "--db", str(out / "live.duckdb"), "--label", args.model,
                   *(a for case in wanted for a in ("--case", case))]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, check=False)
        if done.returncode != 0:
            print(f"[probe] the recording exited {done.returncode}; run again to continue", flush=True)
    recorded = {c: [s for s in points[c] if probe_cassette_path(out, f"openai:{args.model}", c, s).exists()]
                for c in wanted}  # fmt: skip
    recorded = {c: steps for c, steps in recorded.items() if steps}
    if recorded:
        write_summary(args.model, out, flags, recorded, points)
    return 0


def replay_args(recorded: dict[str, list[int]], points: dict[str, list[int]], flags: list[str]) -> list[str]:
    """The `tag-probe` arguments that replay exactly the recorded probes: the cases, and when any case is recorded
    in part, every recorded probe named with `--probe` (the probes named are the only ones a probe run takes, so a
    case recorded whole is named probe by probe too)."""
    named = any(steps != points[case] for case, steps in recorded.items())
    probes = [f"{case}:{step}" for case, steps in recorded.items() for step in steps] if named else []
    return [*(a for case in recorded for a in ("--case", case)), *(a for p in probes for a in ("--probe", p)), *flags]


def write_summary(
    model: str, out: Path, flags: list[str], recorded: dict[str, list[int]], points: dict[str, list[int]]
) -> None:
    """Replay the recorded probes offline and write summary.json from what the replay measured (a case recorded in
    part: its recorded steps named with `--probe`)."""
    cases = list(recorded)
    probe_args = replay_args(recorded, points, flags)
    with tempfile.TemporaryDirectory() as tmp:
        db, js = Path(tmp) / "replay.duckdb", Path(tmp) / "probe.json"
        subprocess.run([*CLI, "tag-probe", *probe_args, "--cassettes", str(out), "--record-mode", "none",
                        "--db", str(db), "--label", model, "--json", str(js)],
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        measured = ProbeMeasure.model_validate_json(js.read_bytes()).models[0].model_copy(update={"bench_run_id": None})
    summary = RecordedProbe(model=model, probe_args=tuple(probe_args), cases=len(cases), measured=measured)
    (out / "summary.json").write_text(json.dumps(summary.model_dump(mode="json"), indent=1) + "\n")
    print(f"[probe] {out / 'summary.json'}: {len(cases)} cases, {measured.judged} judged tags", flush=True)


if __name__ == "__main__":
    sys.exit(main())
