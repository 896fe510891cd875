"""A conclusion read as a careful person reads it: normalised to whole tokens, cut into sentences and clauses, each
phrase found with whether its clause asserts, denies or only wonders about it.

Normalisation: case-folded (NFKC), `n't` read as `not`, a letter joined to a following number by `-` or `_` written
as one token (`R-217` = `R217`), a number with its dots, colons or slashes one token (`0.35`, `23:00`, `2/8`) and
never split or matched inside another number (`300` is not in `3000`; `2.14` matches `2.14.0`, a version or time
written longer), a number's unit a token apart (`300s` = `300 s`), Chinese one token per character.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

__all__ = ["Stance", "analyse", "tokens"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"\d+(?:[.:/]\d+)+|\d+|[a-z][a-z0-9]*\*?|[{_CJK}]|\*")
_JOIN = re.compile(r"(?<=[a-z])[-_](?=\d)")
_NOT = re.compile(r"n't\b")
# a sentence ends at . ! ? followed by a space or the end (so 0.35 and 2.14.0 stay whole), at ; and at a line break
_SENTENCE = re.compile(r"[.!?](?=\s|$)|[;\n。；！？]")
_CLAUSE_WORDS = frozenset("but and or while whereas although though however yet so which instead then".split())
# a comma or colon ends a clause unless it is inside a number (23:00, 1,000)
_CLAUSE_MARK = re.compile(r"[，：、（）()—–]|(?<!\d)[,:]|[,:](?!\d)")
_CLAUSE_CJK = ("但是", "但", "而", "因为", "所以", "并且", "或者", "然而")
_NEGATION = frozenset("not no never none neither nor without cannot nothing unrelated irrelevant excluded".split())
_NEGATION_PAIRS = frozenset({("ruled", "out"), ("rules", "out"), ("rule", "out"), ("rather", "than"),
                             ("instead", "of"), ("other", "than")})  # fmt: skip
_MEMBERSHIP = frozenset({"in", "on", "part"})  # "not in the allowlist" says what is missing from it, not that it is not
_NEAR = 1
"""A negation with at most this many words (fillers not counted) between it and a phrase denies it ("did not expire",
"was not the certificate"); one farther off in the clause negates a longer predicate ("not received within 300s"): the
phrase is then neither asserted nor denied."""
_FILLER = frozenset("the a an any its their our his her this that these those be been being is are was were has have "
                    "had do does did".split())  # fmt: skip
_NEGATION_CJK = ("并非", "不是", "没有", "排除", "不", "没", "未", "非", "无")
_NOT_NEGATION_CJK = ("不足", "不再", "无法")  # "insufficient", "no longer", "unable": a fact, not a denial
_HEDGE = frozenset("maybe perhaps possibly possible might could unclear uncertain unknown whether".split())
_HEDGE_CJK = ("可能", "也许", "或许", "不确定", "是否")


class Stance(StrEnum):
    """How a clause holds a phrase it contains."""

    ASSERTED = "asserted"
    """Stated as so."""
    DENIED = "denied"
    """Just after a negation in its clause (`not`, `no`, `rather than`, `不`): denied."""
    NEGATED = "negated"
    """Farther after a negation in its clause: part of a negated predicate, neither asserted nor denied."""
    HEDGED = "hedged"
    """In a clause that only wonders (`maybe`, `might`, `whether`, `可能`)."""


@dataclass(frozen=True, slots=True)
class _Clause:
    sentence: int
    tokens: tuple[str, ...]
    cues: tuple[int, ...]  # positions of negation cues
    hedged: bool


@dataclass(frozen=True, slots=True)
class Found:
    """One place a phrase occurs."""

    sentence: int
    """The sentence it is in (0-based)."""
    stance: Stance
    """How its clause holds it."""
    clause: int
    """The clause it is in (0-based, over the whole conclusion)."""


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _JOIN.sub("", _NOT.sub(" not", text))


@lru_cache(maxsize=4096)
def tokens(phrase: str) -> tuple[str, ...]:
    """A phrase's tokens after normalisation (a word's trailing `*` kept: it matches any word it begins)."""
    return tuple(_TOKEN.findall(_normalise(phrase)))


def _token_matches(want: str, got: str) -> bool:
    if want.endswith("*"):
        return len(want) > 1 and got.startswith(want[:-1]) and not got[0].isdigit()
    if got == want:
        return True
    # a number written longer with its own separators (2.14 ~ 2.14.0, 23:00 ~ 23:00:00); never 300 ~ 3000
    return want[:1].isdigit() and len(got) > len(want) and got.startswith(want) and got[len(want)] in ".:/"


def _cjk_cues(text: str, cues: Sequence[str], exceptions: Sequence[str] = ()) -> list[int]:
    """Character positions of the cues in `text`, skipping an exception that starts at the same place."""
    out: list[int] = []
    for cue in cues:
        for m in re.finditer(re.escape(cue), text):
            if not any(text.startswith(x, m.start()) for x in exceptions) and all(
                not (p <= m.start() < p + 2) for p in out
            ):
                out.append(m.start())
    return out


def _clauses(text: str) -> list[_Clause]:
    out: list[_Clause] = []
    for s_index, sentence in enumerate(_SENTENCE.split(_normalise(text))):
        for piece in re.split(f"{_CLAUSE_MARK.pattern}|{'|'.join(_CLAUSE_CJK)}", sentence):
            words = _TOKEN.findall(piece)
            current: list[str] = []
            for w in [*words, ""]:
                if w in _CLAUSE_WORDS or w == "":
                    if current:
                        out.append(_clause(s_index, current))
                    current = []
                else:
                    current.append(w)
    return out


def _clause(sentence: int, words: list[str]) -> _Clause:
    text = "".join(words)
    cues = [i for i, w in enumerate(words)
            if w in _NEGATION and not (w == "not" and i + 1 < len(words) and words[i + 1] in _MEMBERSHIP)]  # fmt: skip
    cues += [i + 1 for i in range(len(words) - 1) if (words[i], words[i + 1]) in _NEGATION_PAIRS]
    # Chinese cues: map character offsets of the joined text back to token positions (one CJK character = one token)
    offsets, at = [], 0
    for w in words:
        offsets.append(at)
        at += len(w)
    for char_at in _cjk_cues(text, _NEGATION_CJK, _NOT_NEGATION_CJK):
        cues.append(max(i for i, o in enumerate(offsets) if o <= char_at))
    hedged = any(w in _HEDGE for w in words) or any(cue in text for cue in _HEDGE_CJK)
    return _Clause(sentence, tuple(words), tuple(sorted(set(cues))), hedged)


@dataclass(frozen=True, slots=True)
class Reading:
    """A conclusion cut into clauses, ready to find phrases in."""

    clauses: tuple[_Clause, ...]

    def find(self, phrase: str) -> list[Found]:
        """Every place `phrase` occurs (as whole tokens), with how its clause holds it."""
        want = tokens(phrase)
        if not want:
            return []
        out: list[Found] = []
        for index, clause in enumerate(self.clauses):
            got = clause.tokens
            for start in range(len(got) - len(want) + 1):
                if all(_token_matches(w, g) for w, g in zip(want, got[start : start + len(want)], strict=True)):
                    before = [c for c in clause.cues if c < start]
                    gap = [w for w in got[max(before) + 1 : start] if w not in _FILLER] if before else []
                    if before and len(gap) <= _NEAR:
                        stance = Stance.DENIED
                    elif before:
                        stance = Stance.NEGATED
                    elif clause.hedged:
                        stance = Stance.HEDGED
                    else:
                        stance = Stance.ASSERTED
                    out.append(Found(clause.sentence, stance, index))
        return out


def analyse(conclusion: str) -> Reading:
    """`conclusion` cut into sentences and clauses, each with its negation cues and whether it hedges."""
    return Reading(tuple(_clauses(conclusion)))
