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
from pathlib import Path

from runners.domain.evalset import BUILTIN_DIR, load_cases
from runners.domain.splits import Split, split_of_cases
from runners.live.models import get

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "runners.cli"]


def sweep_flags(
    model: str, agent: str, thresholds: str, ablate: str = "none", plain_prompt: str = "plain"
) -> list[str]:
    """The flags every batch and the replay share (the registry's request settings, generous timeouts; the control
    switched off and the plain loop's prompt when they are not the defaults)."""
    local = get(model)
    r = local.request
    return [
        "--model", f"openai:{model}", "--temperature", f"{r.temperature:g}", "--tool-choice", r.tool_choice,
        "--schema-mode", r.schema_mode.value, "--tool-call-format", r.tool_call_format.value,
        "--no-gain-threshold", thresholds, "--epochs", "1", "--deadline", "3600", "--model-timeout-seconds", "900",
        *(["--agent", agent] if agent != "native" else []),
        *(["--ablate", ablate] if ablate != "none" else []),
        *(["--plain-prompt", plain_prompt] if plain_prompt != "plain" else []),
    ]  # fmt: skip


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
    parser.add_argument("--model", required=True, help="a registered model (runners/live/models.py)")
    parser.add_argument("--base-url", required=True, help="the model server, e.g. http://127.0.0.1:8081/v1")
    parser.add_argument("--split", choices=(*(s.value for s in Split if s is not Split.UNASSIGNED), "all"),
                        default="all", help="which cases (evalsets/splits/; held-out first when all)")  # fmt: skip
    parser.add_argument("--thresholds", default="1,2,3,4")
    parser.add_argument("--batch", type=int, default=6, help="cases per sweep (default 6)")
    parser.add_argument("--agent", default="native")
    parser.add_argument("--ablate", default="none", help="the Harness control switched off (harness-bench --ablate)")
    parser.add_argument("--plain-prompt", default="plain", help="the plain loop's prompt (plain or harness)")
    parser.add_argument(
        "--cases",
        type=Path,
        default=None,
        help="a file of case ids, one a line, recorded in its order (instead of --split)",
    )
    parser.add_argument(
        "--seed-from",
        type=Path,
        default=None,
        help="a recording of the same model whose cassettes each batch starts from",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default cassettes/MODEL[-AGENT][-harness-prompt][-no-CONTROL][-new-held-out]",
    )
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.json from the cassettes")
    args = parser.parse_args(argv)
    name = args.model if args.agent == "native" else f"{args.model}-{args.agent}"
    name += "-harness-prompt" if args.plain_prompt == "harness" else ""
    name += f"-no-{args.ablate}" if args.ablate != "none" else ""
    name += "-new-held-out" if args.split == Split.NEW_HELD_OUT.value and args.cases is None else ""
    out: Path = args.out or ROOT / "cassettes" / name
    out.mkdir(parents=True, exist_ok=True)
    cases = load_cases([str(BUILTIN_DIR)])
    splits = split_of_cases(cases)
    ranked = (Split.HELD_OUT, Split.NEW_HELD_OUT, Split.DEV)
    order = [c.id for split in ranked for c in cases if splits[c.id] is split]
    wanted = [i for i in order if args.split == "all" or splits[i].value == args.split]
    if args.cases is not None:
        wanted = [line.strip() for line in args.cases.read_text().splitlines() if line.strip()]
    done_file = out / "recorded.txt"
    done = [line for line in done_file.read_text().split("\n") if line] if done_file.exists() else []
    flags = sweep_flags(args.model, args.agent, args.thresholds, args.ablate, args.plain_prompt)
    todo = [i for i in wanted if i not in done]
    print(f"[record] {args.model} ({args.agent}): {len(done)} cases recorded, {len(todo)} to go", flush=True)
    while todo and not args.summary_only:
        batch, todo = todo[: args.batch], todo[args.batch :]
        command = [*CLI, "sweep", *flags, "--base-url", args.base_url, "--cassettes", str(out),
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
        summary = subprocess.run(
            [sys.executable, "-m", "runners.decisions.real_models", "--db", str(db), "--label", model,
             "--model", model, "--sweep-args", shlex.join(sweep_args)],
            cwd=ROOT, check=True, capture_output=True, text=True,
        )  # fmt: skip
    (out / "summary.json").write_text(summary.stdout)
    live = out / "live.duckdb"
    if live.exists():
        cost = subprocess.run(
            [sys.executable, "-m", "runners.decisions.real_models", "--db", str(live), "--label", model,
             "--model", model, "--recording-cost", str(out)],
            cwd=ROOT, check=True, capture_output=True, text=True,
        )  # fmt: skip
        (out / "recording.json").write_text(cost.stdout)
    print(f"[record] {out / 'summary.json'}: {len(done)} cases", flush=True)


if __name__ == "__main__":
    sys.exit(main())
