"""Planning a run: the declared settings (one entry per knob: CLI flag, help, bounds, DuckDB column, resume), the run
options, the shard arithmetic and run ids, and the rules that refuse a flag that would be ignored or contradicts
another. Nothing here has a side effect: a plan is built and validated before the first file is opened.
"""
