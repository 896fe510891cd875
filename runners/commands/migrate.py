"""`harness-bench migrate`: upgrade a metrics database in place to this harness-bench's schema version."""

from __future__ import annotations

import argparse
from typing import Any

from runners.commands._common import EXIT_OK, _add_db, _say, _sub

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "migrate", "upgrade a metrics database in place to this harness-bench's schema version",
             "Reading commands read older databases through an upgraded temporary copy; this upgrades the file"
             " itself (what every writing command does first).")  # fmt: skip
    _add_db(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.store.connection import check_database_file, connect
    from runners.store.migrations import SCHEMA_VERSION, current_version

    check_database_file(args.db, must_exist=True, writing=True)
    before = connect(args.db, read_only=True, upgrade=False)
    try:
        version = current_version(before)
    finally:
        before.close()
    connect(args.db).close()
    _say(f"{args.db}: schema version {version} → {SCHEMA_VERSION}" if version != SCHEMA_VERSION
         else f"{args.db}: already at schema version {SCHEMA_VERSION}")  # fmt: skip
    return EXIT_OK
