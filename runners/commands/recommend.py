"""`harness-bench recommend`: the thresholds and budgets a sweep recommends, with 95% intervals."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from rich.text import Text

from runners.commands._common import EXIT_OK, RecommendFlags, _add_db, _add_recommend_choices, _fail, _say, _sub, out
from runners.plan.flags import Flag, FlagModel
from runners.rendering import tables

__all__ = ["register", "run"]


class _RecommendFlags(FlagModel):
    """`recommend`'s flag of its own (its choices are `RecommendFlags`, the library's `RecommendChoices` as flags)."""

    sweep: Annotated[str | None, Flag(metavar="SWEEP_ID")] = None
    """sweep id (default: the newest)"""


def register(sub: Any) -> None:
    p = _sub(sub, "recommend", "recommend thresholds and budgets from a sweep, with 95% intervals")
    _add_db(p)
    _RecommendFlags.add_flags(p, "recommend")
    _add_recommend_choices(p, "recommend")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.decisions.recommend import METRIC_DEFINITIONS, measure, recommend
    from runners.run.sweep import sweep_ids
    from runners.store.connection import connect

    choices = RecommendFlags.from_args(args, "recommend")
    if not Path(args.db).exists() and (hint := _elsewhere(Path(args.db))):
        _fail(f"{args.db}: no such DuckDB file; {hint}")
    con = connect(args.db, read_only=True)
    try:
        known = sweep_ids(con)
        sweep = args.sweep or (known[0] if known else None)
        if sweep is None:
            _fail(f"{args.db} holds no sweeps; {_elsewhere(args.db) or 'run `harness-bench sweep` first'}")
        if sweep not in known:
            _fail(f"--sweep: unknown sweep {sweep!r} in {args.db}; known: {', '.join(known[:5]) or 'none'}")
        stats = measure(con, sweep)
    finally:
        con.close()
    if not stats:
        _fail(f"sweep {sweep} has no case runs yet")
    rec = recommend(stats, choices.objective, rule=choices.rule, margin=choices.margin)
    picked = rec.chosen.label(rec.columns) if rec.separable else "none — the sweep is too small to separate them"
    out.print(Text.assemble(("Recommendation: ", "bold"), picked))
    _say(rec.reasoning)
    out.print(tables.stats_table(f"sweep {sweep}: {len(stats)} configurations", rec, stats))
    for name, definition in METRIC_DEFINITIONS.items():
        _say(f"  {name}: {definition.split(' — ')[-1]}")
    return EXIT_OK


def _elsewhere(db: Path) -> str | None:
    """Which other database beside `db` holds sweeps (a user in a folder with `sweep.duckdb` who ran `recommend`
    without `--db`), as the fix to print; None when none does. Read only; a file that is not a readable DuckDB
    database is passed over."""
    from runners.run.sweep import sweep_ids
    from runners.store.connection import connect

    found: list[str] = []
    for other in sorted(db.resolve().parent.glob("*.duckdb")):
        if other == db.resolve() or not other.is_file():
            continue
        try:
            con = connect(other, read_only=True)
        except Exception:  # not ours, damaged, locked: not a suggestion
            continue
        try:
            count = len(sweep_ids(con))
        except Exception:
            count = 0
        finally:
            con.close()
        if count:
            found.append(f"--db {other.name} ({count} sweep{'s' if count > 1 else ''})")
    return f"this folder has {', '.join(found[:3])}" if found else None
