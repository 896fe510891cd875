"""`harness-bench schema`: print the JSON Schema of evaluation files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from runners.commands._common import EXIT_OK, _sub

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = _sub(sub, "schema", "print the JSON Schema of evaluation files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from runners.domain.evalset import json_schema

    sys.stdout.write(json_schema())
    return EXIT_OK
