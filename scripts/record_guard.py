"""Record a real model as the SemanticGuard on the labelled conclusions, resumably, and write its rates (a developer
tool).

    python -m scripts.record_guard --model qwen2.5-coder-1.5b --base-url http://127.0.0.1:8131/v1 [--sets held-out,dev]
    python -m scripts.record_guard --model qwen2.5-coder-1.5b --rates-only

Runs `harness-bench guard-check` on `evalsets/guard/SET.jsonl` for each set in order (the held-out one first) with
record mode `new_episodes`: a conclusion already in its case's cassette is replayed, so a stopped recording continues
where it was. The cassettes go to `cassettes/guards/guard-MODEL/<case>/epoch0.json`; the rates, with the guard
switched off beside the model, to `reports/guards/SET-MODEL.json` — what the offline replay test compares against.
`--rates-only` rewrites the rates from the cassettes alone (offline, record mode `none`). The model must be in the
registry (`runners/live/models.py`); the server is yours to start (`harness-bench serve-model NAME --port P`, one
model server at a time). Commit the cassettes and the rates.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from runners.live.models import MODELS

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "runners.cli"]
SETS = ("held-out", "dev")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, choices=sorted(MODELS), help="a registered model")
    parser.add_argument("--base-url", help="the model server, e.g. http://127.0.0.1:8131/v1")
    parser.add_argument("--sets", default=",".join(SETS), help="labelled sets in order (default held-out,dev)")
    parser.add_argument("--rates-only", action="store_true", help="rewrite the rates from the cassettes, offline")
    args = parser.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        parser.error(f"--sets: {unknown[0]!r} is not one of {', '.join(SETS)}")
    if not args.rates_only and not args.base_url:
        parser.error("--base-url is required to record")
    reports = ROOT / "reports" / "guards"
    reports.mkdir(parents=True, exist_ok=True)
    for name in sets:
        command = [*CLI, "guard-check", "--conclusions", f"evalsets/guard/{name}.jsonl", "--guard", "off",
                   "--guard", "model", "--guard-model", args.model, "--guard-cassettes", "cassettes/guards",
                   "--json", str(reports / f"{name}-{args.model}.json")]  # fmt: skip
        if not args.rates_only:
            command += ["--guard-base-url", args.base_url, "--record-mode", "new_episodes"]
        done = subprocess.run(command, cwd=ROOT, check=False)
        if done.returncode != 0:
            print(f"record_guard: {name} ended with exit {done.returncode}; run again to resume", file=sys.stderr)
            return done.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
