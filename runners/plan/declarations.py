"""Which models declare a bench run's settings and options (`Declarations`): the Harness's config class, the model
settings class and the option concerns. Every reader of the declaration (the parser, the settings of a run, the
columns a database is given, `--resume`) reads the one in effect, which a caller passes in (`main(argv,
declarations=...)`, `declaring(...)`) for the extent of a call — a test declaring one more setting or option
passes its models in instead of replacing a module's attribute."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness import HarnessConfig
from runners.plan.bench_config import BenchHarnessConfig
from runners.plan.model_settings import ModelSettings

if TYPE_CHECKING:
    from runners.plan.flags import FlagModel

__all__ = ["Declarations", "current", "declaring"]


@dataclass(frozen=True, slots=True)
class Declarations:
    """The models a bench run's settings and options are declared by."""

    harness_config: type[HarnessConfig] = BenchHarnessConfig
    """The class harness settings are declared by (HarnessConfig's fields and the bench's stop rule)."""
    model_settings: type[ModelSettings] = ModelSettings
    """The class model settings are declared by."""
    concerns: Mapping[str, type[FlagModel]] = field(default_factory=dict)
    """Option models by the `BenchOptions` field that holds each, replacing that field's own (none: every concern
    as `BenchOptions` declares it)."""

    def __hash__(self) -> int:  # a mapping field is not hashable; its items are
        return hash((self.harness_config, self.model_settings, tuple(self.concerns.items())))


_CURRENT: ContextVar[Declarations] = ContextVar("declarations", default=Declarations())  # noqa: B039


def current() -> Declarations:
    """The declarations in effect (the bench's own unless a caller passed others in)."""
    return _CURRENT.get()


@contextmanager
def declaring(declarations: Declarations | None) -> Iterator[Declarations]:
    """`declarations` in effect for the extent of the block (None: the ones already in effect); the case runs a run
    starts in threads read them too (their context is copied)."""
    if declarations is None:
        yield current()
        return
    token = _CURRENT.set(declarations)
    try:
        yield declarations
    finally:
        _CURRENT.reset(token)
