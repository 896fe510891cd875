"""ToolScopeNormalizer: a stable scope from a tool input (docs/architecture.md §5.3).

Only parameter-level identity is proven here: key order, insignificant whitespace and case,
equivalent timestamp notations and filled-in defaults. Natural-language paraphrases are *not*
merged — that is the model's NO_GAIN duty, not something code can prove.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from harness.contracts import JsonValue

_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?\s*(?:Z|z|UTC|[+-]\d{2}(?::?\d{2})?)?$"
)
_SPACES = re.compile(r"\s+")


def normalize_timestamp(text: str) -> str | None:
    """ISO-8601-ish timestamp in any common notation -> `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`, else None.

    A timestamp without an offset is taken as UTC, the platform's log convention.
    """
    candidate = text.strip()
    if not _TIMESTAMP.match(candidate):
        return None
    candidate = candidate.replace(" ", "T", 1).replace(" ", "")
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    elif candidate.endswith("UTC"):
        candidate = candidate[:-3] + "+00:00"
    elif re.search(r"[+-]\d{4}$", candidate):
        candidate = candidate[:-2] + ":" + candidate[-2:]
    elif re.search(r"[+-]\d{2}$", candidate) and candidate.count(":") <= 2 and "T" in candidate:
        candidate += ":00"
    # fromisoformat accepts at most 6 fractional digits.
    candidate = re.sub(r"(\.\d{6})\d+", r"\1", candidate)
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    utc = parsed.astimezone(UTC)
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ"
    return utc.strftime(fmt)


class ToolScopeNormalizer:
    """Turns a business input into a canonical, comparable scope string."""

    __slots__ = ("_case_sensitive", "_defaults", "_set_fields")

    def __init__(
        self,
        defaults: Mapping[str, JsonValue] | None = None,
        case_sensitive_fields: frozenset[str] = frozenset(),
        set_fields: frozenset[str] = frozenset(),
    ) -> None:
        self._defaults = dict(defaults or {})
        self._case_sensitive = case_sensitive_fields
        self._set_fields = set_fields

    def canonical(self, value: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        """The canonical form as a dict (defaults filled, nulls dropped, values normalised)."""
        merged: dict[str, JsonValue] = {**self._defaults, **value}
        out: dict[str, JsonValue] = {}
        for key in sorted(merged, key=lambda k: k.strip()):
            item = merged[key]
            if item is None:
                continue
            name = key.strip()
            out[name] = self._value(item, name in self._case_sensitive, name in self._set_fields)
        return out

    def normalize(self, value: Mapping[str, JsonValue]) -> str:
        """The scope string: canonical JSON with sorted keys."""
        return json.dumps(self.canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def _value(self, item: JsonValue, case_sensitive: bool, as_set: bool) -> JsonValue:
        if isinstance(item, bool) or item is None:
            return item
        if isinstance(item, str):
            stamp = normalize_timestamp(item)
            if stamp is not None:
                return stamp
            text = _SPACES.sub(" ", item.strip())
            return text if case_sensitive else text.casefold()
        if isinstance(item, float):
            return int(item) if item.is_integer() else item
        if isinstance(item, int):
            return item
        if isinstance(item, list):
            values = [self._value(v, case_sensitive, False) for v in item]
            if as_set:
                unique = {json.dumps(v, sort_keys=True): v for v in values}
                return [unique[k] for k in sorted(unique)]
            return values
        # Nested objects are normalised with the same rules (no nested defaults).
        return {
            k.strip(): self._value(v, case_sensitive, False)
            for k, v in sorted(item.items(), key=lambda kv: kv[0].strip())
            if v is not None
        }
