"""The bounds every path of reading a cases file keeps (`_Bounds`), and the bounded event readers.

A few bytes of anchors and aliases can stand for billions of nodes (an alias bomb), which construction and
validation would each walk. Nesting, the aliases of one case (or other top-level value) and the nodes they add, and
the nodes aliases add to the whole file are capped; past a cap the file is refused with a `LimitError` at the alias
(or the opening bracket) that crosses it, before anything is built. The fast path (`_yaml_fast`) checks the same
bounds, read from here.
"""

from __future__ import annotations

import io
import os
from typing import IO, TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent
from yaml.resolver import Resolver

__all__ = ["MAX_ALIASES_PER_UNIT", "MAX_ALIAS_NODES_PER_UNIT", "MAX_DEPTH", "LimitError"]


MAX_DEPTH = 100
"""Collections nested in one another (the built-in files nest 9 deep): deeper, Python's recursive composer,
constructor and validators would overflow the stack."""
MAX_ALIASES_PER_UNIT = 10_000
"""Aliases in one case (or one other top-level value)."""
MAX_ALIAS_NODES_PER_UNIT = 100_000
"""Nodes the aliases of one case (or one other top-level value) stand for, counted as if written out (a built-in
case aliases about a hundred): each costs construction and validation like a written one."""
_ALIAS_NODES_FREE = 1_000_000
"""Nodes aliases may add to a whole file beyond one per byte of it: what `load_cases` holds stays within a small
multiple of what the file would hold written out."""


class LimitError(ComposerError):
    """The document passes a bound of `_Bounds` (nesting, aliases): refused at the mark where it does."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)


def _stream_size(stream: IO[str] | IO[bytes] | str | bytes) -> int:
    """The stream's length in bytes (characters for text), for the file's alias allowance; 0 when unknown."""
    if isinstance(stream, (str, bytes)):
        return len(stream)
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        pass
    try:
        here = stream.tell()
        end = stream.seek(0, io.SEEK_END)
        stream.seek(here)
        return int(end)
    except (OSError, AttributeError, ValueError):
        return 0


class _Bounds(Composer):
    """PyYAML's composer, counting as it composes what its aliases stand for (a node's size as if every alias in
    it were written out, known per anchor) and how deep collections nest; `LimitError` past a bound.

    A unit is what `_cases` composes at once: a case, another top-level value, or a root that is not a mapping."""

    def init_bounds(self, size: int) -> None:
        self.alias_allowance = _ALIAS_NODES_FREE + size
        """Nodes aliases may add to this document."""
        self.expanded = 0
        """Nodes composed so far, an alias counted as the nodes it stands for."""
        self.alias_nodes = 0
        """Nodes aliases added so far (the document)."""
        self.anchor_sizes: dict[str, int] = {}
        """Anchor -> the size of its node, once composed (an alias inside its own anchor counts 1)."""
        self.depth = 0
        """Collections open."""
        self.unit_aliases = 0
        self.unit_alias_nodes = 0

    def start_unit(self) -> None:
        """The next node composed is a new unit: its own alias counts start at 0."""
        self.unit_aliases = self.unit_alias_nodes = 0

    if TYPE_CHECKING:  # the parser's, mixed in beside this class (PyYAML's stubs leave it untyped)

        def peek_event(self) -> Any: ...

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()
        if isinstance(event, AliasEvent):
            node = Composer.compose_node(self, parent, index)  # raises on an undefined alias
            added = self.anchor_sizes.get(event.anchor or "", 1)
            self.expanded += added
            self.alias_nodes += added
            self.unit_aliases += 1
            self.unit_alias_nodes += added
            mark = event.start_mark
            if self.unit_aliases > MAX_ALIASES_PER_UNIT:
                raise LimitError(f"more than {MAX_ALIASES_PER_UNIT:,} aliases in one case (or top-level value)", mark)
            if self.unit_alias_nodes > MAX_ALIAS_NODES_PER_UNIT:
                raise LimitError(
                    f"alias *{event.anchor} makes the aliases of one case (or top-level value) stand for more than "
                    f"{MAX_ALIAS_NODES_PER_UNIT:,} nodes (an alias bomb?)",
                    mark,
                )
            if self.alias_nodes > self.alias_allowance:
                raise LimitError(
                    f"alias *{event.anchor} makes the file's aliases stand for more than {self.alias_allowance:,} "
                    f"nodes ({_ALIAS_NODES_FREE:,} plus one per byte of the file)",
                    mark,
                )
            return node
        anchor = event.anchor
        before = self.expanded
        opens = isinstance(event, (SequenceStartEvent, MappingStartEvent))
        if opens:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise LimitError(f"collections nested more than {MAX_DEPTH} deep", event.start_mark)
        node = Composer.compose_node(self, parent, index)
        self.depth -= opens
        self.expanded += 1
        if anchor is not None:
            self.anchor_sizes[anchor] = self.expanded - before
        return node


class _PureStream(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, _Bounds, SafeConstructor, Resolver):
    def __init__(self, stream: IO[str] | IO[bytes] | str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _Bounds.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CStream(CParser, _Bounds, SafeConstructor, Resolver):
        # the C parser's events, composed here a subtree at a time (its own composer takes whole documents)
        def __init__(self, stream: IO[str] | IO[bytes] | str | bytes) -> None:
            CParser.__init__(self, stream)
            _Bounds.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)


def _reader(stream: IO[str] | IO[bytes] | str | bytes, use_c: bool, size: int | None = None) -> Any:
    """A bounded event reader of `stream`; `size`: the file's bytes, for its alias allowance (default: measured)."""
    p = _CStream(stream) if use_c and yaml.__with_libyaml__ else _PureStream(stream)
    p.init_bounds(_stream_size(stream) if size is None else size)
    return p
