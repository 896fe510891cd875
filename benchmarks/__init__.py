"""Benchmarks (never part of the test command): `make perf`."""
