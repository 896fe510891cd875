"""A "did you mean" for a mistyped command, flag, case id or label: the close matches among the known names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, known: Iterable[str], *, limit: int = 3) -> str:
    """` (did you mean 'x'?)` with up to `limit` close matches of `word` among `known` (difflib's ratio ≥ 0.6, as
    git and argparse 3.14 suggest), or "" when nothing is close: appended to the one-line error as it is."""
    names = sorted(set(known))
    close = difflib.get_close_matches(word, names, n=limit, cutoff=0.6)
    if not close:
        return ""
    # Only the ones about as close as the closest: one obvious fix is not buried among look-alikes.
    best = difflib.SequenceMatcher(None, word, close[0]).ratio()
    close = [c for c in close if difflib.SequenceMatcher(None, word, c).ratio() >= best - 0.05]
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
