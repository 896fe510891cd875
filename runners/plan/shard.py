"""Shards across machines: one run or sweep split by stable ids, named once for every shard.

Partition. A work item is (grid point, case, epoch); it belongs to shard `I` of `N` (1-based, like
`--shard=1/4` in Playwright or Jest) when

    int(sha256(point identity JSON + "\\n" + case id + "\\n" + epoch)[:16 hex]) mod N == I - 1

The point identity is the canonical JSON of every setting that is not an endpoint setting (the base URL
and the key variable say where the model is reached, not what is measured; `--resume` may change them).
So the partition does not depend on the order of the cases, on the machine, on the evaluation files'
paths or on which other cases are selected: the same item lands in the same shard on every machine.

Ids. Shards write separate files and must agree on ids without talking to each other, so a sharded
run is named by the user: `--run-id NAME` (required with `--shard`; in CI the workflow run number).
The bench run id is `br-NAME`; in a sweep the sweep id is `sw-NAME` and each grid point is
`br-NAME-<first 10 hex of sha256(point identity)>`; case run ids stay `<bench run id>/<case>/<epoch>`.
The id does not hash the plan on purpose: a shard run with other settings, cases or epochs under the
same name gets the same id, so `harness-bench merge` sees the clash and refuses it instead of adding a
second, unrelated run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from runners.plan.settings import RunSettings, declaration

if TYPE_CHECKING:
    from runners.domain.evalset import EvalCase

MAX_SHARDS = 10_000
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class ShardError(ValueError):
    """Unusable shard or run-id input (exit 2); the message names the flag and the value."""


class RunStatus(StrEnum):
    """Status of a bench run, sweep or shard (the `status` columns)."""

    RUNNING = "running"
    """A process is writing it (or died doing so: the next writer marks it interrupted)."""
    COMPLETED = "completed"
    """Every planned case run is written."""
    INTERRUPTED = "interrupted"
    """Stopped early (Ctrl-C, SIGTERM, SIGKILL) or, merged, missing a shard: `--resume` or merge the rest."""
    FAILED = "failed"
    """Stopped by an error."""


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """`--shard I/N`: this process runs the work items of shard `index` out of `count`."""

    index: int
    """1-based shard number, 1 ≤ index ≤ count."""
    count: int
    """Number of shards the work is split into."""

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """`I/N` with 1 ≤ I ≤ N ≤ MAX_SHARDS; ShardError names what is wrong."""
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m:
            raise ShardError(f"--shard {text!r}: expected I/N, shard I (1-based) of N, like 1/4")
        index, count = int(m.group(1)), int(m.group(2))
        if not 1 <= count <= MAX_SHARDS:
            raise ShardError(f"--shard {text}: N must be from 1 to {MAX_SHARDS}")
        if not 1 <= index <= count:
            raise ShardError(f"--shard {text}: I is 1-based and must be from 1 to {count}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, identity: str, case_id: str, epoch: int) -> bool:
        """Whether the work item (point identity, case, epoch) belongs to this shard."""
        return shard_of(identity, case_id, epoch, self.count) == self.index


def identity_json(settings: RunSettings) -> str:
    """Canonical JSON of the settings that make a grid point (every setting but the endpoint ones)."""
    decl = declaration()
    values = {k: v for k, v in settings.values().items() if not decl[k].endpoint}
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def shard_of(identity: str, case_id: str, epoch: int, count: int) -> int:
    """The 1-based shard of a work item among `count` shards (stable across machines and processes)."""
    digest = hashlib.sha256(f"{identity}\n{case_id}\n{epoch}".encode()).hexdigest()
    return int(digest[:16], 16) % count + 1


def select(
    spec: ShardSpec | None, settings: RunSettings, planned: Iterable[tuple[EvalCase, int]]
) -> list[tuple[EvalCase, int]]:
    """This shard's share of the planned (case, epoch) items, in plan order (all of them without a shard)."""
    items = list(planned)
    if spec is None:
        return items
    identity = identity_json(settings)
    return [(c, e) for c, e in items if spec.holds(identity, c.id, e)]


def check_run_id(text: str) -> str:
    """A usable `--run-id` (it becomes part of the bench run id, the sweep id and every case-run id)."""
    if not RUN_ID_PATTERN.fullmatch(text):
        shown = repr(text) if len(text) <= 60 else f"{text[:60]!r}… ({len(text)} characters)"
        raise ShardError(
            f"--run-id {shown}: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return text


def bench_run_id(run_id: str, settings: RunSettings, *, in_sweep: bool) -> str:
    """The bench run id of a named run (`br-NAME`), or of one point of a named sweep."""
    if not in_sweep:
        return f"br-{run_id}"
    return f"br-{run_id}-{hashlib.sha256(identity_json(settings).encode()).hexdigest()[:10]}"


def sweep_id(run_id: str) -> str:
    """The sweep id of a named sweep."""
    return f"sw-{run_id}"


# -- what a stored file says ---------------------------------------------------------------------------
def stored_shard(bench_run_id: str, shards: Sequence[ShardSpec]) -> ShardSpec | None:
    """The shard a bench run was run as, from the shard rows its file holds of it (none: unsharded). A run merged
    from several shard files cannot be resumed as one: each shard's own file can."""
    if not shards:
        return None
    if len(shards) > 1:
        held = ",".join(str(s.index) for s in shards)
        raise ShardError(
            f"--resume {bench_run_id}: this file holds shards {held} of {shards[0].count} merged by"
            " `harness-bench merge`; resume the unfinished shard in its own file, then merge again"
        )
    return shards[0]


def refuse_existing(taken: Mapping[str, str], db: object) -> None:
    """A named run must not reuse an id already in the file (`taken`: such ids, in the order asked, to the status
    of what each names), or its rows would mix with another run's."""
    for value, status in list(taken.items())[:1]:  # the first one asked is the one named
        raise ShardError(
            f"--run-id: {value} already exists in {db} (status {status}); continue it with --resume {value}"
            " or choose another --run-id"
        )
