"""The `harness-bench` commands, one module per command (or per tight group: the transcript commands `show`, `diff` and
`export` share `transcripts.py`): `run.py` and `sweep.py` (their shared flags and run handling in `_bench.py`),
`cases.py`, `schema.py`, `recommend.py`, `report.py`, `gate.py`, `whatif.py`, `compare_stops.py`, `capture.py`,
`import_traces.py` (`import`), `merge.py`, `migrate.py`, `serve_sim.py`, `serve_model.py`, `real_models.py`,
`tag_probe.py`, `judge_check.py`, `guard_check.py`, `import_suite.py`. Each module declares its flags in
`register(sub)`, which adds its subparser and points `func` at its `run(args) -> int`; `runners/cli.py` calls the
`register` of the command a command line names (its `COMMANDS` table: name → module), or every `register` in the order
`--help` lists them, and dispatches to `args.func`. The helpers every command shares —
the one-line error and plain-text printing, argparse types and the parser that turns a refused flag into one line, the
database and output-path checks made before anything is written, progress bars, how `recommend` and `report` show the
choices their decision declares (`RecommendFlags`) — live in `_common.py`; tag-probe's own flags, which the real-models
command reads too, are in `_bench.py`.
"""
