"""Every live run replays exactly: the rows a replay from the live runs' cassettes stored are compared with the live
ones — case_runs (every count, outcome, stop reason, budget hit, error), tool_calls and events, kind by kind and
attempt by attempt — everything but ids, labels and timings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runners.store.live_invariants import comparable_rows

__all__ = ["compare_replay"]

_CASE_RUN_VOLATILE = frozenset({"bench_run_id", "case_run_id", "label", "wall_ms", "finished_at"})
_EVENT_VOLATILE = frozenset({"bench_run_id", "case_run_id", "t_ms", "latency_ms"})


def compare_replay(live_db: Path, live_ids: Sequence[str], replay_db: Path, replay_id: str | None) -> list[str]:
    """Where the replay of live runs differs from them: case_runs (every count, outcome, stop reason, budget hit,
    error), tool_calls and events (kind by kind, attempt by attempt) — not ids, labels or timings."""
    if not live_ids:
        return []
    if replay_id is None:
        return ["no replay ran"]
    out: list[str] = []
    for table, volatile in (("case_runs", _CASE_RUN_VOLATILE), ("tool_calls", _EVENT_VOLATILE - {"t_ms"}),
                            ("events", _EVENT_VOLATILE)):  # fmt: skip
        live = comparable_rows(live_db, table, live_ids, volatile)
        replay = comparable_rows(replay_db, table, [replay_id], volatile)
        for case_id in sorted(set(live) | set(replay)):
            a, b = live.get(case_id, []), replay.get(case_id, [])
            if a == b:
                continue
            if len(a) != len(b):
                out.append(f"{case_id}: {table} has {len(a)} rows live, {len(b)} replayed")
                continue
            for i, (ra, rb) in enumerate(zip(a, b, strict=True)):
                diff = {k: (ra[k], rb[k]) for k in ra if ra[k] != rb[k]}
                if diff:
                    shown = "; ".join(
                        f"{k} {str(v[0])[:60]!r} live, {str(v[1])[:60]!r} replayed" for k, v in diff.items()
                    )
                    out.append(f"{case_id}: {table} row {i}: {shown}")
                    break
    return out
