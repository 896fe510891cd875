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
    tag_probe: Annotated[Path | None, Flag(metavar="PATH")] = None
    """a tag probe of the model (`tag-probe --json`'s output or a recorded probe's summary.json): also say which
    NO_GAIN threshold its measured tags imply, beside the swept one"""


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
    flags = _RecommendFlags.from_args(args, "recommend")
    probed = _probe_of(flags.tag_probe) if flags.tag_probe is not None else None
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
    if probed is not None:
        from runners.decisions.tag_probe import beside_swept
        from runners.plan.settings import swept_names

        names = list(swept_names())
        swept = rec.chosen.config[names.index("no_gain_threshold")] if "no_gain_threshold" in rec.columns else None
        out.print(Text("Tag probe: ", style="bold"))
        for m in probed.models:
            _say(f"  {beside_swept(m, int(swept) if isinstance(swept, int) else None)}")
            _say(f"  {m.threshold.reasoning}")
    return EXIT_OK


def _probe_of(path: Path) -> Any:
    """The tag probe of `--tag-probe PATH`; a file that cannot be read or is not a probe: one line naming it."""
    from runners.decisions.tag_probe import ProbeFileError, read_probe_file
    from runners.store.output_files import path_kind

    kind = path_kind(path)
    if kind is not None:
        _fail(f"--tag-probe {path} is {kind}, not a file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        _fail(f"--tag-probe {path}: cannot be read ({exc.strerror or exc})")
    try:
        return read_probe_file(data, f"--tag-probe {path}")
    except ProbeFileError as exc:
        _fail(str(exc))


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
