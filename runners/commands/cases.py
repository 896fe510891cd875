"""`harness-bench cases`: list the selected evaluation cases (validating their files on the way)."""

from __future__ import annotations

import argparse
from typing import Any

from runners.commands._common import EXIT_OK, _add_selection, _load_with_progress, _sub, out
from runners.rendering import tables

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "cases", "list evaluation cases with their family and expectations (and validate the files)")
    _add_selection(p, "cases")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.domain.evalset import spool_cases

    cases = _load_with_progress(lambda: spool_cases(args.evalsets or [], args.case_ids or []))
    if len(cases) <= tables.STREAM_CASES_ABOVE:
        out.print(tables.cases_table(cases, out.width))
        return EXIT_OK
    for line in tables.cases_lines(cases, out.width):
        out.file.write(line + "\n")
    out.file.flush()
    return EXIT_OK
