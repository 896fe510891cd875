"""What calibrating a live model costs: live model calls of a prefix-shared 4-threshold sweep against four
independent runs, and wall time per case run at each model size — from the committed recordings.

    python benchmarks/bench_real_models.py

Reads `cassettes/<model>/summary.json` (model calls per threshold, replayed by `make test`) and
`cassettes/<model>/recording.json` (the live calls stored in the cassettes and the wall time per case run,
measured when the sweep was recorded). Four independent runs need the sum of every threshold's calls; the
prefix-shared sweep (record mode `new_episodes`, requests matched on their JSON body) needs only the calls
no lower-numbered point had made. Target: at most 1.5x the calls of one run. Both runs are printed: the default
threshold's (2) and the longest (the highest threshold's) — a sweep that includes a threshold cannot cost fewer calls
than that threshold's run alone, so against the default run the ratio is at least longest / default whatever the
recording does.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runners.decisions.real_models import RecordedSummary, RecordingCost  # noqa: E402


def main() -> int:
    rows = []
    for summary_path in sorted((ROOT / "cassettes").glob("*/summary.json")):
        cost_path = summary_path.with_name("recording.json")
        if not cost_path.exists():
            continue
        summary = RecordedSummary.model_validate_json(summary_path.read_text())
        cost = RecordingCost.model_validate_json(cost_path.read_text())
        per = {t.no_gain_threshold: t.model_calls + t.guard_calls for t in summary.thresholds}
        one = per.get(2) or max(per.values())
        longest = max(per.values())
        independent = sum(per.values())
        walls = ", ".join(f"t{t} {s:.0f} s" for t, s in cost.wall_s_per_case_run.items())
        rows.append(
            f"| {summary.model} | {summary.cases} | {len(per)} | {cost.recorded_calls} | {one} | {longest} | "
            f"{independent} | **{cost.recorded_calls / one:.2f}x** | **{cost.recorded_calls / longest:.2f}x** | "
            f"{independent / one:.2f}x | {walls} |"
        )
    if not rows:
        print("no cassettes/<model>/recording.json committed")
        return 1
    print(
        "| model | cases | thresholds | live calls (shared prefixes) | calls of one run (t2) | "
        "calls of the longest run | independent runs | shared / t2 run | shared / longest run | "
        "independent / t2 run | wall per case run, recording |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
