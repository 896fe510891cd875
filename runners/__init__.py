"""harness-bench's bench: evaluation sets, runs, metrics, CLI — a stack of layers, each a package named for what it
does, imports pointing down only (docs/architecture.md §10.2): `domain/` (cases, tools, profiles, the model spec, the
secrets boundary) < `plan/` (what a run is) < `store/` (every byte on disk) < `run/` (executing a plan) <
`endpoints/` (serve-sim) < `interchange/` (runs in and out) < `decisions/` (judging stored runs) < `rendering/` (what a
person reads) < `api.py` (the Python API of notebooks and scripts) < `pipelines/` (the bench run in process and the
decisions composed over it) < `live/` (real local models) < `commands/` (one module per command) < `cli.py` (the
parser and dispatch).
"""
