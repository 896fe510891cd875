"""The event path: an evaluation file's cases read one at a time from the YAML event stream.

`yaml.load` builds the node tree of the whole file before constructing anything: for a file of 100,000
cases that tree is gigabytes. Here libyaml's parser (or PyYAML's pure one) produces events, and only the
node subtree of the current case is composed, constructed into plain Python data and handed out; the next
case starts from nothing. Anchors stay known for the whole document (a case may alias a fixture defined
under another top-level key), as `yaml.load` would resolve them. Errors are PyYAML's own, with its marks.
Every node is composed within the bounds of `_yaml_bounds`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import yaml
from yaml.composer import ComposerError
from yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent, StreamEndEvent
from yaml.nodes import Node, ScalarNode, SequenceNode

from runners.domain._yaml_bounds import _reader

__all__ = ["CasesShapeError", "DuplicateCasesKeyError"]

_STR_TAG = "tag:yaml.org,2002:str"


class CasesShapeError(ValueError):
    """The document is not a mapping with a `cases` list (or the file is empty)."""


class DuplicateCasesKeyError(yaml.YAMLError):
    """The top-level mapping has `cases` twice: which list is meant is ambiguous."""

    def __init__(self, mark: yaml.Mark) -> None:
        self.problem = "the top-level key 'cases' appears twice; keep one 'cases' list"
        self.problem_mark = mark
        super().__init__(self.problem)


def _event_cases(stream: IO[str] | IO[bytes] | str | bytes, use_c: bool, skip: int = 0) -> Iterator[object]:
    p = _reader(stream, use_c)
    try:
        for n, item in enumerate(_cases(p)):
            if n >= skip:
                yield item
    finally:
        p.dispose()


def _cases(p: Any, key_lines: list[int] | None = None) -> Iterator[object]:
    p.get_event()  # StreamStartEvent
    if p.check_event(StreamEndEvent):
        raise CasesShapeError("the file is empty")
    start = p.get_event()  # DocumentStartEvent
    found = False
    if not p.check_event(MappingStartEvent):
        p.start_unit()
        p.compose_node(None, None)
    else:
        p.get_event()
        p.depth += 1  # the root mapping
        while not p.check_event(MappingEndEvent):
            p.start_unit()  # a key and its value (but a `cases` list's items are each their own)
            key = p.compose_node(None, None)
            is_cases = isinstance(key, ScalarNode) and key.tag == _STR_TAG and key.value == "cases"
            if not is_cases:
                p.compose_node(None, None)  # another top-level key: read (its anchors kept), not kept
                continue
            if found:
                raise DuplicateCasesKeyError(key.start_mark)
            found = True
            if key_lines is not None:
                key_lines.append(key.start_mark.line)
            if p.check_event(SequenceStartEvent):
                yield from _items(p)
            else:
                value: Node = p.compose_node(None, None)
                if not isinstance(value, SequenceNode):
                    raise CasesShapeError("'cases' is not a list")
                for item in value.value:  # an alias of a list anchored elsewhere: already composed
                    yield p.construct_document(item)
        p.get_event()
        p.depth -= 1
    _end(p, start)
    if not found:
        raise CasesShapeError("no 'cases' list")


def _items(p: Any) -> Iterator[object]:
    p.get_event()  # SequenceStartEvent
    p.depth += 1  # the list itself
    while not p.check_event(SequenceEndEvent):
        p.start_unit()
        node = p.compose_node(None, None)
        data = p.construct_document(node)
        del node
        yield data
    p.get_event()
    p.depth -= 1


def _end(p: Any, start: Any) -> None:
    p.get_event()  # DocumentEndEvent
    if not p.check_event(StreamEndEvent):  # what `yaml.load` says of a second document
        event = p.get_event()
        raise ComposerError(
            "expected a single document in the stream", start.start_mark, "but found another document",
            event.start_mark,
        )  # fmt: skip
    p.anchors = {}
