"""A model's gain tags measured by the tag probe: the confusion against the graded truth, the trivial taggers beside
it, and the NO_GAIN threshold its measured rates imply.

**Judged** is every probe the model answered with a tag the Harness applied: the threshold counts these and nothing
else. A valid Draft instead of a call is recorded as such, per grade, with what it implies (a conclusion: GAINED, the
model concluded on what it had; none: NO_GAIN, it gave up) — the collection ends there whatever the threshold, so a
Draft is not a tag the contract counts. A tag is **right**
when `runners.domain.truth_grades.right_tags` allows it for the observation's grade; the errors are **optimistic**
(GAINED on `nothing_new`: the contract's count never grows, it never fires) and **premature** (NO_GAIN on
`root_cause` or `excludes`: the count grows on the evidence, the contract may stop on the answer).

**Baselines** score the same judged observations as a tagger that always says GAINED, one that always says NO_GAIN
and one that says GAINED exactly when the result is non-empty. Every probed observation is non-empty (the Harness
tags an empty result NO_GAIN itself and asks the model nothing), so the last one scores what always-GAINED scores:
what a model's tag adds is measured against it.

**Intervals** are over cases: a case's probes share its conversation, so the case is the unit — each share is the
ratio of two sums over cases, with a percentile bootstrap that resamples cases (`scipy.stats.bootstrap`, paired,
seeded).

**The threshold.** Treating tags as independent at the measured rate p of NO_GAIN on evidence, the contract stops
on the evidence only after T consecutive premature NO_GAINs, probability p^T; the implied threshold is the smallest T
with p^T below the risk (5% unless told), from the point estimate and, to be safe, from the interval's upper bound.
Beside it, (1 − q)^T with q the rate of GAINED on `nothing_new`: the chance the contract fires at that threshold on
T consecutive observations that held nothing new (the Harness's own NO_GAIN on empty results aside).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import scipy.stats
from pydantic import BaseModel, ConfigDict, Field

from harness import InformationGain
from runners.domain.probe_answers import ProbeAnswer
from runners.domain.truth_grades import TruthGrade, right_tags
from runners.store.tag_probes import StoredProbe

__all__ = [
    "DEFAULT_RISK",
    "BASELINES",
    "GradeRow",
    "ModelProbe",
    "ProbeMeasure",
    "ProbeFileError",
    "ProbeRow",
    "RecordedProbe",
    "Share",
    "TaggerScore",
    "ThresholdAdvice",
    "beside_swept",
    "implied_threshold",
    "measure_probes",
    "read_probe_file",
]

DEFAULT_RISK = 0.05
"""The probability of stopping on the evidence a threshold is chosen to stay below."""
_EVIDENCE = (TruthGrade.ROOT_CAUSE, TruthGrade.EXCLUDES)
_RESAMPLES = 2_000
_SEED = 20_261_206
BASELINES = ("always GAINED", "always NO_GAIN", "GAINED iff non-empty")
"""The trivial taggers, by name."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Share(_Model):
    """A share over judged tags with its 95% interval over cases (None without a judged tag)."""

    count: int
    """Tags counted."""
    of: int
    """Tags it is a share of."""
    cases: int
    """Cases those tags came from."""
    value: float | None
    """count / of."""
    low: float | None
    """Lower bound (bootstrap over cases)."""
    high: float | None
    """Upper bound (bootstrap over cases)."""

    def fmt(self) -> str:
        """`12/40 = 30% [18%, 44%]`, or `0/0`."""
        if self.value is None or self.low is None or self.high is None:
            return f"{self.count}/{self.of}"
        return f"{self.count}/{self.of} = {self.value:.0%} [{self.low:.0%}, {self.high:.0%}]"


class TaggerScore(_Model):
    """How a tagger (the model, or a trivial one) scores on the judged observations."""

    judged: int
    """Judged observations."""
    right: int
    """Right tags."""
    optimistic: int
    """GAINED on `nothing_new`."""
    premature: int
    """NO_GAIN on `root_cause` or `excludes`."""
    accuracy: Share
    """right / judged."""


class GradeRow(_Model):
    """The model's tags on the observations of one truth grade."""

    grade: TruthGrade
    """The grade."""
    judged: int
    """Judged observations of this grade."""
    gained: int
    """Tagged GAINED."""
    no_gain: int
    """Tagged NO_GAIN."""
    drafted: int
    """Probes of this grade answered by a valid Draft instead of a call (not judged)."""
    concluded: int
    """Of those Drafts, how many had a conclusion (implying GAINED; the others imply NO_GAIN)."""
    right: int
    """Right tags."""
    accuracy: Share
    """right / judged."""


class ThresholdAdvice(_Model):
    """What the measured rates imply for the NO_GAIN threshold."""

    risk: float
    """The probability of stopping on the evidence the threshold stays below."""
    premature_rate: Share
    """NO_GAIN on `root_cause` / `excludes`, over those judged."""
    optimistic_rate: Share
    """GAINED on `nothing_new`, over those judged."""
    threshold: int | None
    """The smallest T with premature_rate^T < risk (point estimate); None when no threshold does (rate 1) or
    nothing on the evidence was judged."""
    threshold_upper: int | None
    """The same from the rate's upper bound (the cautious reading)."""
    fires: float | None
    """(1 − optimistic rate)^threshold: the chance the contract fires on `threshold` consecutive observations that
    held nothing new."""
    reasoning: str
    """The advice in one sentence."""


class ProbeRow(_Model):
    """One probe as measured."""

    case_id: str
    """The case."""
    step: int
    """The reference step probed."""
    grade: TruthGrade
    """The observation's truth grade."""
    answer: ProbeAnswer
    """What the model answered."""
    tag: InformationGain | None
    """The tag the Harness applied (TAGGED only)."""
    implied: InformationGain | None
    """What a Draft implies (DRAFT only)."""


class ModelProbe(_Model):
    """One model's tag probe: the confusion per truth grade, the baselines, the implied threshold."""

    model: str
    """The model (its registry name or spec)."""
    bench_run_id: str | None = None
    """The tag-probe bench run measured (None when not from a database)."""
    probes: int
    """Probes made."""
    judged: int
    """Probes judged: answered by a call whose tag the Harness applied."""
    drafted: int
    """Probes answered by a valid Draft instead of a call (recorded with what they imply, not judged)."""
    unjudged: dict[ProbeAnswer, int] = Field(default_factory=dict)
    """Probes not judged, by answer (DRAFT, UNTAGGED, INVALID_DRAFT, NO_ANSWER)."""
    right: int
    """Right tags."""
    optimistic: int
    """GAINED on `nothing_new`."""
    premature: int
    """NO_GAIN on `root_cause` / `excludes`."""
    accuracy: Share
    """right / judged, with its interval over cases."""
    by_truth: dict[TruthGrade, GradeRow]
    """The confusion per truth grade."""
    baselines: dict[str, TaggerScore]
    """The trivial taggers on the same judged observations."""
    threshold: ThresholdAdvice
    """What the measured rates imply for the NO_GAIN threshold."""
    answers: list[ProbeRow]
    """Every probe."""


class ProbeMeasure(_Model):
    """The tag probe of one or more models (`harness-bench tag-probe --json`)."""

    models: list[ModelProbe]
    """One entry per model."""


def _judged(row: StoredProbe) -> InformationGain | None:
    return row.tag if row.answer is ProbeAnswer.TAGGED else None


def _share(pairs: dict[str, list[int]]) -> Share:
    """count / of over the cases in `pairs` (case -> [count, of]), bootstrap over the cases that judged any."""
    used = {c: v for c, v in pairs.items() if v[1] > 0}
    count = sum(v[0] for v in used.values())
    of = sum(v[1] for v in used.values())
    if of == 0:
        return Share(count=0, of=0, cases=0, value=None, low=None, high=None)
    value = count / of
    num = np.array([v[0] for v in used.values()], dtype=float)
    den = np.array([v[1] for v in used.values()], dtype=float)
    if len(used) < 2 or np.all(num / den == value):
        return Share(count=count, of=of, cases=len(used), value=value, low=value, high=value)
    res = scipy.stats.bootstrap(
        (num, den), lambda a, b: float(np.sum(a) / np.sum(b)), paired=True, vectorized=False,
        confidence_level=0.95, method="percentile", n_resamples=_RESAMPLES, rng=np.random.default_rng(_SEED),
    )  # fmt: skip
    ci = res.confidence_interval
    return Share(count=count, of=of, cases=len(used), value=value, low=float(ci.low), high=float(ci.high))


def _score(rows: Sequence[tuple[StoredProbe, InformationGain]]) -> TaggerScore:
    right: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    optimistic = premature = 0
    for row, tag in rows:
        grade = row.grade
        ok = tag in right_tags(grade)
        right[row.case_id][0] += ok
        right[row.case_id][1] += 1
        optimistic += grade is TruthGrade.NOTHING_NEW and tag is InformationGain.GAINED
        premature += grade in _EVIDENCE and tag is InformationGain.NO_GAIN
    acc = _share(right)
    return TaggerScore(judged=len(rows), right=acc.count, optimistic=optimistic, premature=premature, accuracy=acc)


def implied_threshold(premature: Share, optimistic: Share, risk: float = DEFAULT_RISK) -> ThresholdAdvice:
    """The smallest NO_GAIN threshold whose chance of T consecutive premature NO_GAINs is below `risk`."""

    def smallest(rate: float | None) -> int | None:
        if rate is None or rate >= 1:
            return None
        if rate <= 0:
            return 1
        return max(1, math.floor(math.log(risk) / math.log(rate)) + 1)

    point, upper = smallest(premature.value), smallest(premature.high)
    fires = None if point is None or optimistic.value is None else (1 - optimistic.value) ** point
    if premature.value is None:
        why = "no observation holding evidence was judged: the tags imply no threshold"
    elif point is None:
        why = f"NO_GAIN on every judged evidence observation ({premature.fmt()}): no threshold keeps the run going"
    else:
        why = (f"NO_GAIN on evidence {premature.fmt()}: T={point} keeps P(T premature NO_GAINs in a row) below"
               f" {risk:.0%} at the measured rate"
               + (f", T={upper} at its upper bound" if upper != point else "")
               + (f"; at T={point} the contract fires on {point} nothing-new observations in a row with probability"
                  f" {fires:.0%} (GAINED on nothing_new {optimistic.fmt()})" if fires is not None else ""))  # fmt: skip
    return ThresholdAdvice(risk=risk, premature_rate=premature, optimistic_rate=optimistic, threshold=point,
                           threshold_upper=upper, fires=fires, reasoning=why)  # fmt: skip


def measure_probes(
    model: str, rows: Sequence[StoredProbe], *, bench_run_id: str | None = None, risk: float = DEFAULT_RISK
) -> ModelProbe:
    """One model's confusion, baselines and implied threshold from its stored probes."""
    judged = [(r, t) for r in rows if (t := _judged(r)) is not None]
    unjudged: dict[ProbeAnswer, int] = defaultdict(int)
    for r in rows:
        if _judged(r) is None:
            unjudged[r.answer] += 1
    score = _score(judged)
    by_truth: dict[TruthGrade, GradeRow] = {}
    for grade in TruthGrade:
        mine = [(r, t) for r, t in judged if r.grade is grade]
        s = _score(mine)
        by_truth[grade] = GradeRow(
            grade=grade, judged=len(mine), gained=sum(t is InformationGain.GAINED for _, t in mine),
            no_gain=sum(t is InformationGain.NO_GAIN for _, t in mine),
            drafted=sum(r.answer is ProbeAnswer.DRAFT and r.grade is grade for r in rows),
            concluded=sum(r.answer is ProbeAnswer.DRAFT and r.grade is grade and r.implied is InformationGain.GAINED
                          for r in rows),
            right=s.right, accuracy=s.accuracy,
        )  # fmt: skip
    on_evidence: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    on_nothing: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r, t in judged:
        grade = r.grade
        if grade in _EVIDENCE:
            on_evidence[r.case_id][0] += t is InformationGain.NO_GAIN
            on_evidence[r.case_id][1] += 1
        elif grade is TruthGrade.NOTHING_NEW:
            on_nothing[r.case_id][0] += t is InformationGain.GAINED
            on_nothing[r.case_id][1] += 1
    baselines = {
        "always GAINED": _score([(r, InformationGain.GAINED) for r, _ in judged]),
        "always NO_GAIN": _score([(r, InformationGain.NO_GAIN) for r, _ in judged]),
        # every probed observation is non-empty: the Harness asks the model about no other
        "GAINED iff non-empty": _score([(r, InformationGain.GAINED) for r, _ in judged]),
    }
    return ModelProbe(
        model=model, bench_run_id=bench_run_id, probes=len(rows), judged=len(judged),
        drafted=sum(r.answer is ProbeAnswer.DRAFT for r in rows),
        unjudged=dict(sorted(unjudged.items())), right=score.right, optimistic=score.optimistic,
        premature=score.premature, accuracy=score.accuracy, by_truth=by_truth, baselines=baselines,
        threshold=implied_threshold(_share(on_evidence), _share(on_nothing), risk),
        answers=[ProbeRow(case_id=r.case_id, step=r.step, grade=r.grade, answer=r.answer, tag=_judged(r),
                          implied=r.implied)
                 for r in rows],
    )  # fmt: skip


class RecordedProbe(_Model):
    """A model's committed tag-probe recording (`cassettes/<model>-probe/summary.json`): the arguments that replay it
    and what the replay measured."""

    model: str
    """The registry name of the model."""
    probe_args: tuple[str, ...]
    """The `harness-bench tag-probe` flags that replay these cassettes (cases, model settings), without `--db`,
    `--json`, `--label`, `--cassettes` and `--record-mode`."""
    cases: int
    """Cases with a recorded probe (a case recorded in part: its recorded steps, named with `--probe`)."""
    measured: ModelProbe
    """The confusion, baselines and implied threshold of the offline replay (`answers` included)."""


class ProbeFileError(ValueError):
    """A file that is neither `tag-probe --json`'s output nor a recorded probe's `summary.json`."""


def read_probe_file(data: bytes, name: str) -> ProbeMeasure:
    """The probe measure of `tag-probe --json`'s output or of a recorded probe's `summary.json`; a file that is
    neither: ProbeFileError, one line naming it and the first field that is wrong."""
    errors: list[str] = []
    for kind in (ProbeMeasure, RecordedProbe):
        try:
            parsed = kind.model_validate_json(data)
        except ValueError as exc:
            first = exc.errors()[0] if hasattr(exc, "errors") else {"loc": (), "msg": str(exc)}
            where = ".".join(str(p) for p in first["loc"]) or "the file"
            errors.append(f"{where}: {first['msg']}")
            continue
        return parsed if isinstance(parsed, ProbeMeasure) else ProbeMeasure(models=[parsed.measured])
    raise ProbeFileError(f"{name}: not a tag probe's JSON nor a recorded probe's summary ({errors[0]})"[:400])


def beside_swept(m: ModelProbe, swept: int | None) -> str:
    """The threshold the model's tags imply beside the one a sweep recommends (None: the sweep did not sweep it)."""
    t = m.threshold
    implied = ("no threshold (its tags dismiss the evidence)" if t.threshold is None and t.premature_rate.of
               else "none (no evidence observation judged)" if t.threshold is None
               else f"NO_GAIN {t.threshold}" + (f" (cautious: {t.threshold_upper})" if t.threshold_upper is not None
                                                 and t.threshold_upper != t.threshold else ""))  # fmt: skip
    if swept is None:
        return f"{m.model}: its tags imply {implied}; the sweep did not vary the NO_GAIN threshold"
    if t.threshold is None:
        agree = ""
    elif swept >= max(t.threshold, t.threshold_upper or 0):
        agree = " — the swept pick is at least as cautious"
    elif swept >= t.threshold:
        agree = " — the swept pick meets the measured rate, not its upper bound"
    else:
        agree = " — the swept pick is lower than the tags allow: runs may stop on the evidence the sweep never showed"
    return f"{m.model}: its tags imply {implied}; the sweep recommends NO_GAIN {swept}{agree}"
