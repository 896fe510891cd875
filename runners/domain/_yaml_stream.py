"""An evaluation file's cases read one at a time from the YAML event stream.

`yaml.load` builds the node tree of the whole file before constructing anything: for a file of 100,000
cases that tree is gigabytes. Here libyaml's parser (or PyYAML's pure one) produces events, and only the
node subtree of the current case is composed, constructed into plain Python data and handed out; the next
case starts from nothing. Anchors stay known for the whole document (a case may alias a fixture defined
under another top-level key), as `yaml.load` would resolve them. Errors are PyYAML's own, with its marks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

__all__ = ["CasesShapeError", "DuplicateCasesKeyError", "iter_raw_cases"]

_STR_TAG = "tag:yaml.org,2002:str"


class CasesShapeError(ValueError):
    """The document is not a mapping with a `cases` list (or the file is empty)."""


class DuplicateCasesKeyError(yaml.YAMLError):
    """The top-level mapping has `cases` twice: which list is meant is ambiguous."""

    def __init__(self, mark: yaml.Mark) -> None:
        self.problem = "the top-level key 'cases' appears twice; keep one 'cases' list"
        self.problem_mark = mark
        super().__init__(self.problem)


class _PureStream(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, Composer, SafeConstructor, Resolver):
    def __init__(self, stream: IO[str] | IO[bytes] | str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CStream(CParser, Composer, SafeConstructor, Resolver):
        # the C parser's events, composed here a subtree at a time (its own composer takes whole documents)
        def __init__(self, stream: IO[str] | IO[bytes] | str | bytes) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)


def _reader(stream: IO[str] | IO[bytes] | str | bytes, use_c: bool) -> Any:
    return _CStream(stream) if use_c and yaml.__with_libyaml__ else _PureStream(stream)


def iter_raw_cases(stream: IO[str] | IO[bytes] | str | bytes, *, use_c: bool = True) -> Iterator[object]:
    """Each item of the document's top-level `cases` list, constructed as `yaml.safe_load` would, in order.

    Raises `yaml.YAMLError` (with its mark) where the stream is not valid YAML, `CasesShapeError` when the
    document is not a mapping with a `cases` list — both possibly after some cases were yielded, as the
    rest of the file is read only then. Everything around the list is read (and checked) too.
    """
    p = _reader(stream, use_c)
    try:
        yield from _cases(p)
    finally:
        p.dispose()


def _cases(p: Any) -> Iterator[object]:
    p.get_event()  # StreamStartEvent
    if p.check_event(StreamEndEvent):
        raise CasesShapeError("the file is empty")
    start = p.get_event()  # DocumentStartEvent
    found = False
    if not p.check_event(MappingStartEvent):
        p.compose_node(None, None)
    else:
        p.get_event()
        while not p.check_event(MappingEndEvent):
            key = p.compose_node(None, None)
            is_cases = isinstance(key, ScalarNode) and key.tag == _STR_TAG and key.value == "cases"
            if not is_cases:
                p.compose_node(None, None)  # another top-level key: read (its anchors kept), not kept
                continue
            if found:
                raise DuplicateCasesKeyError(key.start_mark)
            found = True
            if p.check_event(SequenceStartEvent):
                yield from _items(p)
            else:
                value: Node = p.compose_node(None, None)
                if not isinstance(value, SequenceNode):
                    raise CasesShapeError("'cases' is not a list")
                for item in value.value:  # an alias of a list anchored elsewhere: already composed
                    yield p.construct_document(item)
        p.get_event()
    _end(p, start)
    if not found:
        raise CasesShapeError("no 'cases' list")


def _items(p: Any) -> Iterator[object]:
    p.get_event()  # SequenceStartEvent
    while not p.check_event(SequenceEndEvent):
        node = p.compose_node(None, None)
        data = p.construct_document(node)
        del node
        yield data
    p.get_event()


def _end(p: Any, start: Any) -> None:
    p.get_event()  # DocumentEndEvent
    if not p.check_event(StreamEndEvent):  # what `yaml.load` says of a second document
        event = p.get_event()
        raise ComposerError(
            "expected a single document in the stream", start.start_mark, "but found another document",
            event.start_mark,
        )  # fmt: skip
    p.anchors = {}


def count_cases(stream: IO[str] | IO[bytes] | str | bytes, *, use_c: bool = True) -> int:
    """How many items the top-level `cases` list has, from the events alone (nothing is composed: about a
    quarter of `iter_raw_cases`'s time); 0 when the file is not valid YAML or has no such list (reading it says why)."""
    p = _reader(stream, use_c)
    try:
        depth, n, key_next, in_cases = 0, 0, True, False
        while not isinstance(event := p.get_event(), StreamEndEvent):
            opens = isinstance(event, (MappingStartEvent, SequenceStartEvent))
            closes = isinstance(event, (MappingEndEvent, SequenceEndEvent))
            if in_cases and depth == 2 and not closes:
                n += 1
            if depth == 0 and isinstance(event, SequenceStartEvent):
                return 0  # a list at the top: not an evaluation file
            if depth == 1 and not closes:  # the root mapping's keys and values alternate
                if key_next and isinstance(event, yaml.ScalarEvent):
                    in_cases = event.value == "cases"
                key_next = not key_next
                if key_next:  # a value was just read: a list opened here is counted, a scalar ends it
                    in_cases = in_cases and isinstance(event, SequenceStartEvent)
            depth += opens - closes
            if depth == 1 and closes and in_cases:
                in_cases = False
        return n
    except yaml.YAMLError:
        return 0
    finally:
        p.dispose()
