"""Storage: the DuckDB metrics database (schema, migrations, views, batched writer), the merge of shard databases, the
per-case transcripts, the live check's queries (`live_invariants.py`), the one redaction of secrets every writer
calls (`redact.py`), and atomic file writes. Everything a run or an analysis reads back from disk goes through here.
"""
