"""The bench's domain tools over a case's fixtures: knowledge-base search (`kb_search.py`, BM25), log search
(`log_search.py`) and database query (`db_query.py`, one read-only SELECT validated by sqlglot), the two last over the
one in-memory DuckDB of `_duck.py`; a captured run's tool (`captured_results.py`) that answers its calls with what
they returned; and a suite's declared tool (`declared.py`), answered from its case's fixtures. The built indexes and
the log searches' rows are remembered in bounded memos (`_remembered.py`).
"""
