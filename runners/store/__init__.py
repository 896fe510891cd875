"""Storage: every byte on disk. The DuckDB metrics database: `schema.py` (the row types the writer stores, their
columns derived from them), `migrations.py` (the schema history), `connection.py` (opening, locking, reading an older
file), `views.py`, `writer.py` (the batched writer), `runs.py` (named queries on the run tables), `resume.py` (what
planning reads back from a file), `errors.py`; the live check's queries (`live_invariants.py`); the analysis's
(`analysis_reads.py`, `gate_pairs.py`, `whatif_runs.py`); the tag probes' table (`tag_probes.py`); the cassettes that
record and replay a model's HTTP traffic (`cassettes.py`); the merge of shard databases, the per-case transcripts,
and atomic file writes. Everything a run or an analysis reads back from disk goes through here.
"""
