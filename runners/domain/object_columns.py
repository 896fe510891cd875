"""Rows as DuckDB scans them from Python: one NumPy object array per column.

DuckDB scans such a mapping as it scans a DataFrame (it unifies each column's mixed Python values, and None stays
NULL), orders of magnitude faster than `executemany`, and without pandas (half a second to import). The fixture
tables of the tools and the metrics writer both hand rows over this way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["object_columns"]


def object_columns(rows: Sequence[Sequence[object]], columns: Sequence[str]) -> dict[str, np.ndarray]:
    """`rows` as one object array per name of `columns` (each value as it is: the statement that reads them casts).
    numpy is imported on the first call, not by a command that never hands rows over."""
    import numpy as np

    return {
        name: np.fromiter((row[i] for row in rows), dtype=object, count=len(rows)) for i, name in enumerate(columns)
    }
