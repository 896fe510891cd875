"""The `harness-bench` commands other than `run` and `sweep`, one module per command (or per tight group: the
transcript commands `show`, `diff` and `export` share `transcripts.py`). Each module declares its flags in
`register(sub)`, which adds its subparser and points `func` at its `run(args) -> int`; `runners/cli.py` only calls
every `register` in the order `--help` lists the commands and dispatches to `args.func`. The helpers every command
shares — the one-line error and plain-text printing, argparse types and the parser that turns a refused flag into one
line, the database and output-path checks made before anything is written, progress bars, how `recommend` and
`report` show the choices their decision declares (`RecommendFlags`) — live in `_common.py`.
"""
