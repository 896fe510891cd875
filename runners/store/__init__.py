"""Storage: every byte on disk. The DuckDB metrics database: `schema.py` (the row types the writer stores, their columns
derived from them), `migrations.py` (the schema history; the columns the declared settings and options have had in
`declared_columns.py`), `connection.py` (opening, locking, reading an older file;
`_host.py`: the one DuckDB instance per process every file is attached to), `catalog.py` (the tables and columns
a file holds), `views.py`, `writer.py` (the batched writer), `runs.py` (named queries on the run tables), `resume.py`
(what planning reads back from a file), `errors.py`, `events.py` (a case run's trace read back as typed events); the
reads of the layers above, as named queries returning typed rows: the live check's (`live_invariants.py`), the reports'
and exports' (`report_reads.py`), the gate's (`gate_pairs.py`), the funnel's (`diagnosis_reads.py`), the stored runs a
counterfactual replays (`replayable_runs.py`), a recorded sweep's (`recorded_sweeps.py`), a run to capture
(`captured_runs.py`); imported runs (`imported_runs.py`); the tag probes' rows (`tag_probes.py`); the cassettes that
record and replay a model's HTTP traffic (`cassettes.py`); the merge of shard databases (`merge.py`), the per-case
transcripts (`transcripts.py`), and the one output-file rule (`output_files.py`: whole files, regular files only, never
one of a command's inputs). Everything a run or an analysis reads back from disk goes through here.
"""
