"""harness-bench's bench: evaluation sets, runs, metrics, CLI."""
