"""Record a real model's sweep into cassettes, resumably, a batch of cases at a time (a developer tool).

    python -m scripts.record_real --model qwen2.5-coder-1.5b --base-url http://127.0.0.1:8081/v1 \\
        [--split held-out|new-held-out|dev|all | --cases FILE] [--thresholds 1,2,3,4] [--batch 6] [--agent native] \\
        [--ablate CONTROL] [--plain-prompt harness] [--seed-from DIR] [--out DIR]

Each batch is one `harness-bench sweep` over its cases at every threshold (record mode `new_episodes`, so a threshold
recorded after another adds only the calls where it diverges), into the live database `DIR/live.duckdb` (not
committed). A batch that finished is listed in `DIR/recorded.txt`; the next start skips it, so a stopped recording
continues where it was. After every batch the recorded cases are replayed offline (no server) into a fresh database
and `DIR/summary.json` is written from that replay — what `make test` replays against — and `DIR/recording.json`
from the live database (the recording's cost). Commit `DIR` (without `live.duckdb`) after any batch.

A changed run (`--ablate CONTROL`, `--agent plain --plain-prompt harness`) can start from the model's recording of
the Harness as it ships (`--seed-from cassettes/MODEL`): each batch's cassettes are copied first, so a call the
changed run sends as the recorded one did is replayed and only the calls where it diverges reach the server (with
the SemanticGuard off, none does). `--cases FILE` records the cases in the file's order (e.g. the cases where the
model wrote a conclusion first).

The model's request settings come from the registry (`runners/live/models.py`); the server is yours to start
(`harness-bench serve-model NAME --port P`).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import Field

from harness import HarnessControl
from runners.decisions.real_models import recording_cost, summarize
from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.splits import Split, split_of_cases
from runners.live.models import get
from runners.plan.agent import AgentFramework
from runners.plan.bench_config import PlainPrompt
from runners.plan.flags import Flag, FlagModel
from runners.plan.options import BenchOptions
from runners.plan.settings import axis_flags
from runners.plan.stored_plan import run_argv
from runners.store.recorded_sweeps import read_recorded

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "runners.cli"]


class Which(StrEnum):
    """Which cases a recording takes."""

    HELD_OUT = "held-out"
    NEW_HELD_OUT = "new-held-out"
    DEV = "dev"
    ALL = "all"


class RecordFlags(FlagModel):
    """The recording's flags."""

    model: Annotated[str, Flag(required=True, metavar="NAME", help="a registered model (runners/live/models.py)")]
    """The registered model recorded."""
    base_url: Annotated[str, Flag(required=True, metavar="URL", help="the model server, e.g. http://127.0.0.1:8081/v1")]
    """Where its server answers."""
    split: Annotated[Which, Flag(help="which cases (held-out first when all)")] = Which.ALL
    """Which cases."""
    thresholds: Annotated[str, Flag(metavar="N[,…]", help="the NO_GAIN thresholds swept (default {default})")] = (
        "1,2,3,4"
    )
    """The thresholds swept, comma-separated."""
    batch: Annotated[int, Flag(metavar="N", help="cases per sweep (default {default})")] = Field(
        default=6, ge=1, le=1000
    )
    """Cases per sweep."""
    agent: Annotated[AgentFramework, Flag(help="the agent loop recorded (default {default})")] = AgentFramework.NATIVE
    """The agent loop."""
    ablate: Annotated[
        HarnessControl, Flag(metavar="CONTROL", help="the Harness control switched off (default {default})")
    ] = HarnessControl.NONE
    """The Harness control switched off (`harness-bench --ablate`)."""
    plain_prompt: Annotated[PlainPrompt, Flag(help="the plain loop's prompt (default {default})")] = PlainPrompt.PLAIN
    """The plain loop's system prompt (`harness-bench --plain-prompt`)."""
    cases: Annotated[Path | None, Flag(metavar="FILE", help="case ids, one a line, recorded in the file's order")] = (
        None
    )
    """The cases to record, in order (instead of --split)."""
    seed_from: Annotated[
        Path | None, Flag(metavar="DIR", help="a recording of the same model each batch starts from")
    ] = None
    """A recording of the same model whose cassettes each batch is seeded with."""
    out: Annotated[
        Path | None,
        Flag(metavar="DIR", help="default cassettes/MODEL[-AGENT][-harness-prompt][-no-CONTROL][-new-held-out]"),
    ] = None
    """Where the cassettes go."""
    summary_only: Annotated[bool, Flag(help="rebuild summary.json from the cassettes")] = False
    """Rebuild the summary only."""


def sweep_flags(
    model: str, agent: str, thresholds: str, ablate: str = "none", plain_prompt: str = "plain"
) -> list[str]:
    """The flags every batch and the replay share, rendered from the model's settings (the registry's request
    settings, generous timeouts; the control switched off and the plain loop's prompt), the sweep's options and its
    thresholds axis."""
    local = get(model)
    changed: dict[str, float | str] = {
        "deadline": 3600.0, "model_timeout_seconds": 900.0, "ablate": ablate, "plain_prompt": plain_prompt,
    }  # fmt: skip
    settings = local.run_settings().with_values(changed)
    opts = BenchOptions.of(settings=settings, epochs=1, agent=agent)
    argv = run_argv(opts, always=("model", *type(local.request).model_fields), command="sweep")[2:]
    axis = tuple(int(t) for t in thresholds.split(",") if t.strip())
    return [*argv, *axis_flags({"no_gain_threshold": axis})]


def seed(batch: list[str], source: Path, out: Path) -> None:
    """Copy the batch's cassettes from a recording of the same model (`--seed-from`) where `out` has none: a call the
    changed run sends as the recorded run did is then replayed, and only the calls where it diverges reach the
    server (record mode `new_episodes`)."""
    for case in batch:
        for src in sorted(source.glob(f"openai_*/{case}")):
            dst = out / src.parent.name / case
            if src.is_dir() and not dst.exists():
                shutil.copytree(src, dst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    RecordFlags.add_flags(parser, "record_real")
    args = RecordFlags.from_args(parser.parse_args(argv), "record_real")
    agent = args.agent.value
    name = args.model if agent == "native" else f"{args.model}-{agent}"
    name += "-harness-prompt" if args.plain_prompt is PlainPrompt.HARNESS else ""
    name += f"-no-{args.ablate.value}" if args.ablate is not HarnessControl.NONE else ""
    name += "-new-held-out" if args.split is Which.NEW_HELD_OUT and args.cases is None else ""
    out: Path = args.out or ROOT / "cassettes" / name
    out.mkdir(parents=True, exist_ok=True)
    cases = load_cases([str(BUILTIN_DIR)])
    splits = split_of_cases(cases)
    ranked = (Split.HELD_OUT, Split.NEW_HELD_OUT, Split.DEV)
    order = [c.id for split in ranked for c in cases if splits[c.id] is split]
    wanted = [i for i in order if args.split is Which.ALL or splits[i].value == args.split.value]
    if args.cases is not None:
        wanted = [line.strip() for line in args.cases.read_text().splitlines() if line.strip()]
    done_file = out / "recorded.txt"
    done = [line for line in done_file.read_text().split("\n") if line] if done_file.exists() else []
    flags = sweep_flags(args.model, agent, args.thresholds, args.ablate.value, args.plain_prompt.value)
    endpoint = get(args.model).run_flags(args.base_url)[2:4]  # --base-url URL, rendered like the rest
    todo = [i for i in wanted if i not in done]
    print(f"[record] {args.model} ({agent}): {len(done)} cases recorded, {len(todo)} to go", flush=True)
    while todo and not args.summary_only:
        batch, todo = todo[: args.batch], todo[args.batch :]
        command = [*CLI, "sweep", *flags, *endpoint, "--cassettes", str(out),
                   "--record-mode", "new_episodes", "--db", str(out / "live.duckdb"), "--label", args.model,
                   *(a for i in batch for a in ("--case", i))]  # fmt: skip
        print(f"[record] batch of {len(batch)}: {' '.join(batch)}", flush=True)
        if args.seed_from is not None:
            seed(batch, args.seed_from, out)
        done_run = subprocess.run(command, cwd=ROOT, check=False)
        if done_run.returncode != 0:
            print(f"[record] the batch's sweep exited {done_run.returncode}; stopping (run again to continue)")
            return done_run.returncode
        done += batch
        done_file.write_text("\n".join(done) + "\n")
        write_summary(args.model, out, flags, done)
    if args.summary_only:
        write_summary(args.model, out, flags, done)
    return 0


def write_summary(model: str, out: Path, flags: list[str], done: list[str]) -> None:
    """Replay the recorded cases offline and write summary.json from the replay, recording.json from the live db."""
    case_flags = [a for i in done for a in ("--case", i)]
    sweep_args = [*case_flags, *flags]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "replay.duckdb"
        subprocess.run([*CLI, "sweep", *sweep_args, "--cassettes", str(out), "--record-mode", "none",
                        "--db", str(db), "--label", model], cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        summary = summarize(model, read_recorded(db, model), sweep_args)
    (out / "summary.json").write_text(summary.model_dump_json(indent=1) + "\n")
    live = out / "live.duckdb"
    if live.exists():
        cost = recording_cost(model, read_recorded(live, model), out)
        (out / "recording.json").write_text(cost.model_dump_json(indent=1) + "\n")
    print(f"[record] {out / 'summary.json'}: {len(done)} cases", flush=True)
    print(f"[record] replay: {shlex.join(['harness-bench', 'sweep', *sweep_args])}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
