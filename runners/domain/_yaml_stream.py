"""An evaluation file's cases read one at a time from the YAML event stream.

`yaml.load` builds the node tree of the whole file before constructing anything: for a file of 100,000
cases that tree is gigabytes. Here libyaml's parser (or PyYAML's pure one) produces events, and only the
node subtree of the current case is composed, constructed into plain Python data and handed out; the next
case starts from nothing. Anchors stay known for the whole document (a case may alias a fixture defined
under another top-level key), as `yaml.load` would resolve them. Errors are PyYAML's own, with its marks.

That event path composes in Python, ~60% of a load. With libyaml, a block list of cases (the usual file) takes
a fast path instead: its items are split at their lines and composed by libyaml itself a few cases at a time
(`_fast_items`); the event path takes over, from the first item not yet handed out, wherever the fast path
cannot vouch for the result (an alias across items, a directive, an odd line), so both give the same data and
the same errors with the same marks (`tests/runners/domain/test_evalset_stream.py` compares them on every built-in
file).

Every path is bounded (`_Bounds`): a few bytes of anchors and aliases can stand for billions of nodes (an alias
bomb), which construction and validation would each walk. Nesting, the aliases of one case (or other top-level
value) and the nodes they add, and the nodes aliases add to the whole file are capped; past a cap the file is
refused with a `LimitError` at the alias (or the opening bracket) that crosses it, before anything is built.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import re
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, TypeGuard

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

__all__ = [
    "MAX_ALIASES_PER_UNIT",
    "MAX_ALIAS_NODES_PER_UNIT",
    "MAX_DEPTH",
    "CasesShapeError",
    "DuplicateCasesKeyError",
    "LimitError",
    "count_block_items",
    "count_cases",
    "iter_raw_cases",
    "iter_raw_cases_aside",
]

_STR_TAG = "tag:yaml.org,2002:str"


class CasesShapeError(ValueError):
    """The document is not a mapping with a `cases` list (or the file is empty)."""


class DuplicateCasesKeyError(yaml.YAMLError):
    """The top-level mapping has `cases` twice: which list is meant is ambiguous."""

    def __init__(self, mark: yaml.Mark) -> None:
        self.problem = "the top-level key 'cases' appears twice; keep one 'cases' list"
        self.problem_mark = mark
        super().__init__(self.problem)


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


def iter_raw_cases(
    stream: IO[str] | IO[bytes] | str | bytes, *, use_c: bool = True, fast: bool = True
) -> Iterator[object]:
    """Each item of the document's top-level `cases` list, constructed as `yaml.safe_load` would, in order.

    Raises `yaml.YAMLError` (with its mark) where the stream is not valid YAML, `CasesShapeError` when the
    document is not a mapping with a `cases` list — both possibly after some cases were yielded, as the
    rest of the file is read only then. Everything around the list is read (and checked) too.

    With libyaml (`use_c`) and `fast`, a block list of cases is read a few cases at a time by libyaml's own
    composer (see `_fast_items`); whatever that path cannot vouch for is read again by the event path below,
    which alone says what is wrong and where, so the data and every message are the same either way.
    """
    if fast and use_c and yaml.__with_libyaml__:
        binary = _as_binary(stream)
        if binary is not None:
            yield from _fast_or_events(binary, stream)
            return
    yield from _event_cases(stream, use_c)


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


# The fast path. A block list of cases (`cases:` alone on its line at column 0, items `- ` at one column) is
# split into its items by their lines, and a batch of consecutive items' lines, as written, is handed to libyaml
# (`CParser` composes a whole document in C) and constructed by `_build`. Each item's lines are the same text
# at the same columns as in the file, so they mean what they mean there, with three exceptions that all fail
# loudly in the batch (an alias of an anchor outside it, a tag handle declared by a directive, a split inside a
# multi-line scalar or flow collection): any failure, an unexpected line, or a document around the list that
# the event path does not read as exactly this one `cases` key, and the event path reads the file again from
# the start, skipping the items already handed out (so its items, errors and marks are what the caller sees).

_BATCH_BYTES = 1 << 12
"""A batch of items is cut once it holds this much YAML (a few cases: libyaml's per-document cost amortised,
memory that of a few cases)."""
_AROUND_MAX = 1 << 20
"""Past this much text before or after the list, the event path reads the file (the skeleton is kept whole)."""
_ODD_BREAKS = (b"\r", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
"""Line breaks for YAML that a split on `\\n` would not see: a file with any of them takes the event path."""
_CASES_LINE = re.compile(rb"cases:(?:[ ]+(?:#[^\n]*)?)?\n?\Z")
"""The list's key alone on its line (a comment may follow)."""
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "binary", "timestamp"))


class _Doubt(Exception):
    """The fast path cannot vouch for this file (from here on): the event path reads it."""


class _NotPlain(Exception):
    """A node `_build` leaves to PyYAML's constructor (a merge key, a recursive alias, an unusual tag)."""


_resolve: Any = Resolver.resolve

if yaml.__with_libyaml__:

    class _BatchLoader(CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.plain_tags: dict[str, str] = {}
            """Plain scalar -> its resolved tag, for this batch (its keys repeat from item to item)."""
            self.left = 0
            """Nodes `_build` may still build (`_load_batch` sets it)."""

        def descend_resolver(self, current_node: Any, current_index: Any) -> None:
            if self.yaml_path_resolvers:  # none in a safe load: each node's call is skipped
                Resolver.descend_resolver(self, current_node, current_index)

        def ascend_resolver(self) -> None:
            if self.yaml_path_resolvers:
                Resolver.ascend_resolver(self)

        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is ScalarNode and not self.yaml_path_resolvers:
                if not implicit[0]:
                    return _STR_TAG
                tag = self.plain_tags.get(value)
                if tag is None:
                    tag = self.plain_tags[value] = _resolve(self, kind, value, implicit)
                return tag
            return _resolve(self, kind, value, implicit)

        def construct_document(self, node: Any) -> Any:
            try:
                return _build(self, node, set())
            except _NotPlain:
                _walk_batch(node, None)  # what `_build` checked as it went (nesting), for PyYAML's constructor
                return SafeConstructor.construct_document(self, node)


def _build(c: Any, node: Node, active: set[int]) -> Any:
    """`node` constructed as SafeConstructor would, without its generators and bookkeeping (plain str, int, ...,
    lists and mappings); anything else raises `_NotPlain`. `_Doubt` past the batch's node budget (`c.left`: an
    alias the text check missed would be built once per use) or past `MAX_DEPTH`."""
    c.left -= 1
    if c.left < 0:
        raise _Doubt
    tag, cls = node.tag, node.__class__
    if cls is ScalarNode:
        if tag == _STR_TAG:
            return node.value
        if tag in _SCALAR_TAGS:
            return SafeConstructor.yaml_constructors[tag](c, node)
        raise _NotPlain
    key = id(node)
    if key in active:
        raise _NotPlain  # a recursive alias
    if len(active) + _BATCH_DEPTH > MAX_DEPTH:
        raise _Doubt
    active.add(key)
    if cls is SequenceNode and tag == _SEQ_TAG:
        out: Any = [_build(c, item, active) for item in node.value]
    elif cls is MappingNode and tag == _MAP_TAG:
        out = {}
        for k, v in node.value:
            if k.__class__ is not ScalarNode or (k.tag != _STR_TAG and k.tag not in _SCALAR_TAGS):
                raise _NotPlain  # merge and value keys, collections as keys: PyYAML's rules
            out[_build(c, k, active)] = _build(c, v, active)
    else:
        raise _NotPlain
    active.discard(key)
    return out


def _as_binary(stream: IO[str] | IO[bytes] | str | bytes) -> IO[bytes] | None:
    """A seekable binary file for the fast path, or None (a text stream takes the event path)."""
    if isinstance(stream, str):
        return io.BytesIO(stream.encode("utf-8"))
    if isinstance(stream, bytes):
        return io.BytesIO(stream)
    if isinstance(stream, io.TextIOBase) or not (hasattr(stream, "seekable") and stream.seekable()):
        return None
    try:
        start = stream.tell()
    except (OSError, ValueError):
        return None
    return stream if start == 0 and _reads_bytes(stream) else None


def _reads_bytes(stream: IO[str] | IO[bytes]) -> TypeGuard[IO[bytes]]:
    """Whether reading the stream gives bytes (a binary file, not a text one that is no io.TextIOBase)."""
    try:
        return isinstance(stream.read(0), bytes)
    except (OSError, ValueError):
        return False


def _fast_or_events(f: IO[bytes], stream: IO[str] | IO[bytes] | str | bytes) -> Iterator[object]:
    given = 0
    try:
        for item in _fast_items(f):
            yield item
            given += 1
        return
    except _Doubt:
        pass
    if f is stream:
        f.seek(0)
    yield from _event_cases(stream, True, skip=given)  # a string read again as itself: the marks name it so


_BATCH_DEPTH = 2
"""A batch's list is the file's `cases` list, inside the root mapping: its collections are nested one deeper
there."""
_ALIAS_STAR = re.compile(r"\*[^\s,\[\]{}]")
"""A `*` followed by an anchor's first character."""


def _may_alias(text: str) -> bool:
    """Whether `text` has a `*` where an alias could start (a superset: also `**bold**` in a text); a batch
    without one has no alias."""
    for m in _ALIAS_STAR.finditer(text):
        at = m.start()
        if at == 0 or text[at - 1] in " \t\r\n,[{:":
            return True
    return False


class _FastCounts:
    """What the fast path has counted of the file so far, for the file's alias allowance."""

    def __init__(self, size: int) -> None:
        self.allowance = _ALIAS_NODES_FREE + size
        """Nodes aliases may add to the file (as `_Bounds`)."""
        self.alias_nodes = 0
        """Nodes the batches' aliases added so far."""


def _walk_batch(batch: Node, counts: _FastCounts | None) -> None:
    """`_Bounds`'s checks over a batch composed by libyaml (an alias there is a node met again, an alias inside its
    own anchor one met while open), without building anything: `_Doubt` where the event path would refuse, so
    that it says why and where. `counts` None: nesting only."""
    sizes: dict[int, int] = {}  # node -> its size, every alias in it written out, once walked
    walking: set[int] = set()  # the collections open
    for item in batch.value if isinstance(batch, SequenceNode) else ():
        aliases = alias_nodes = 0
        # post-order: (node, its depth, its children, the next child, its size so far)
        stack: list[tuple[Node, int, list[Node], int, int]] = []

        def enter(node: Node, depth: int, stack: list[tuple[Node, int, list[Node], int, int]] = stack) -> int | None:
            """The node's size when it is an alias or a scalar; None once a collection is pushed."""
            nonlocal aliases, alias_nodes
            key = id(node)
            if key in sizes or key in walking:
                added = sizes.get(key, 1)
                aliases += 1
                alias_nodes += added
                if counts is not None:
                    counts.alias_nodes += added
                    if (
                        aliases > MAX_ALIASES_PER_UNIT
                        or alias_nodes > MAX_ALIAS_NODES_PER_UNIT
                        or counts.alias_nodes > counts.allowance
                    ):
                        raise _Doubt
                return added
            if isinstance(node, ScalarNode):
                sizes[key] = 1
                return 1
            if depth > MAX_DEPTH:
                raise _Doubt
            kids = node.value if isinstance(node, SequenceNode) else [part for pair in node.value for part in pair]
            stack.append((node, depth, kids, 0, 1))
            walking.add(key)
            return None

        top = enter(item, _BATCH_DEPTH + 1)
        while top is None and stack:
            node, depth, kids, i, size = stack[-1]
            if i == len(kids):
                stack.pop()
                walking.discard(id(node))
                sizes[id(node)] = size
                if stack:
                    parent = stack[-1]
                    stack[-1] = (parent[0], parent[1], parent[2], parent[3], parent[4] + size)
                continue
            stack[-1] = (node, depth, kids, i + 1, size)
            got = enter(kids[i], depth + 1)
            if got is not None:
                stack[-1] = (node, depth, kids, i + 1, size + got)


def _load_batch(lines: list[bytes], n: int, counts: _FastCounts) -> list[object]:
    data = b"".join(lines)
    if any(b in data for b in _ODD_BREAKS):
        raise _Doubt
    enabled = gc.isenabled()
    gc.disable()  # a batch's nodes hold no cycles: the collector would only walk them
    try:
        text = data.decode("utf-8")
        loader = _BatchLoader(text)
        loader.left = 2 * len(text) + 16  # nodes written out take a character or two each
        if _may_alias(text):
            node = loader.get_single_node()
            if node is not None:
                before = counts.alias_nodes
                _walk_batch(node, counts)
                loader.left += counts.alias_nodes - before  # the walk vouched for what they add
            items = loader.construct_document(node) if node is not None else None
        else:
            items = loader.get_single_data()
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise _Doubt from exc
    finally:
        if enabled:
            gc.enable()
    if not isinstance(items, list) or len(items) != n:
        raise _Doubt
    return items


def _fast_items(f: IO[bytes]) -> Iterator[object]:
    """The items of a block `cases` list, a batch at a time; raises `_Doubt` where the event path must take over
    (possibly after some items)."""
    counts = _FastCounts(_stream_size(f))
    before: list[bytes] = []
    size = 0
    for line in f:
        if _CASES_LINE.match(line):
            break
        if line.startswith(b"%"):
            raise _Doubt  # a directive: tag handles the batches would not know
        before.append(line)
        size += len(line)
        if size > _AROUND_MAX:
            raise _Doubt
    else:
        raise _Doubt  # no `cases:` line: the event path says what the file is
    key_line = len(before)
    batch: list[bytes] = []
    n_batch, batch_size, dash, inner = 0, 0, b"", b""
    after: list[bytes] = []
    for line in f:
        if inner and line.startswith(inner):
            batch.append(line)  # the current item's content, the usual line
            batch_size += len(line)
            continue
        body = line.lstrip(b" ")
        if not body.strip() or body.startswith(b"#"):
            if batch:
                batch.append(line)
                batch_size += len(line)
            continue
        if not dash:
            indent = len(line) - len(body)
            if not body.startswith(b"-") or body[1:2] not in (b" ", b"\n"):
                after.append(line)  # not a block list: `cases` is something else
                break
            dash, inner = line[: indent + 1], b" " * (indent + 1)
        if line.startswith(dash) and line[len(dash) : len(dash) + 1] in (b" ", b"\n"):
            if batch_size >= _BATCH_BYTES:
                yield from _load_batch(batch, n_batch, counts)
                batch, n_batch, batch_size = [], 0, 0
            batch.append(line)
            n_batch += 1
            batch_size += len(line)
            continue
        after.append(line)  # less indented: the list has ended
        break
    last = _load_batch(batch, n_batch, counts) if batch else []
    size = 0
    for line in f:
        after.append(line)
        size += len(line)
        if size > _AROUND_MAX:
            raise _Doubt
    _check_around(before, after, key_line, bool(dash), counts)
    yield from last  # held back until the rest reads: an error just after the list comes before them, as there


def _check_around(before: list[bytes], after: list[bytes], key_line: int, listed: bool, counts: _FastCounts) -> None:
    """The document with the list emptied must read (by the event path) as a block mapping (a block list inside
    a flow one is an error) whose only `cases` key is the one at `key_line`, holding that empty list, within the
    bounds the list's items left; otherwise `_Doubt`."""
    if not listed:
        raise _Doubt
    skeleton = b"".join([*before, b"cases: []\n", *after])
    if any(b in skeleton for b in _ODD_BREAKS):
        raise _Doubt
    lines: list[int] = []
    p = _reader(skeleton, True)
    try:
        p.get_event()  # StreamStartEvent
        p.get_event()  # DocumentStartEvent
        root = p.peek_event()
        if not isinstance(root, MappingStartEvent) or root.flow_style:
            raise _Doubt
    finally:
        p.dispose()
    p = _reader(skeleton, True, 0)
    p.alias_allowance = counts.allowance - counts.alias_nodes
    try:
        if list(_cases(p, lines)) != [] or lines != [key_line]:
            raise _Doubt
    except (yaml.YAMLError, CasesShapeError) as exc:
        raise _Doubt from exc
    finally:
        p.dispose()


def count_block_items(stream: IO[bytes]) -> int | None:
    """How many items a block `cases` list has, from its lines alone (the lines `_fast_items` splits at: several
    times faster than `count_cases`); None when the file is not such a list by its lines (`count_cases` counts
    it then). A progress bar's length, not a check: the file may still be invalid."""
    for line in stream:
        if _CASES_LINE.match(line):
            break
        if line.startswith(b"%"):
            return None
    else:
        return None
    n, dash = 0, -1
    for line in stream:
        body = line.lstrip(b" ")
        if not body.strip() or body.startswith(b"#"):
            continue
        indent = len(line) - len(body)
        is_item = body.startswith(b"-") and body[1:2] in (b" ", b"\n")
        if dash < 0:
            if not is_item:
                return None
            dash = indent
        if indent == dash and is_item:
            n += 1
        elif indent <= dash:
            break  # less indented: the list has ended
    return n


# Reading in another process. On a large file the YAML is half of `cases`' time and validation the other half: a
# reader process parses while the caller validates, on a second core. It is spawned, never forked: the caller may
# have threads (a progress bar's, an executor's) whose locks a forked child would inherit held. The reader sends
# batches of items through a pipe (it blocks while the pipe is full: memory stays that of a few batches) and then
# how it ended.

_ASIDE_BATCH = 64
"""Items a message carries."""


def _read_aside(path: str, conn: Any) -> None:
    try:
        with open(path, "rb") as f:
            batch: list[object] = []
            for item in iter_raw_cases(f):
                batch.append(item)
                if len(batch) == _ASIDE_BATCH:
                    conn.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
                    batch = []
            conn.send_bytes(pickle.dumps(("items", batch), pickle.HIGHEST_PROTOCOL))
        end: tuple[object, ...] = ("end",)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = (mark.name, mark.line, mark.column) if mark is not None else None
        end = ("yaml", getattr(exc, "problem", None) or str(exc), where)
    except CasesShapeError as exc:
        end = ("shape", str(exc))
    except OSError as exc:
        end = ("os", exc.errno, exc.strerror)
    conn.send_bytes(pickle.dumps(end, pickle.HIGHEST_PROTOCOL))
    conn.close()
    os._exit(0)  # nothing to flush or finalise: the reader's work is in the pipe


def iter_raw_cases_aside(path: str) -> Iterator[object]:
    """`iter_raw_cases` of the file at `path` (libyaml), parsed by a spawned process while the caller works on
    the items. Its errors come back as `yaml.MarkedYAMLError` with the problem and the mark's line and column,
    `CasesShapeError` and `OSError`: what a message about the file needs. Where no process can be started, or
    the reader dies, the file is read here (from the first item not yet handed out)."""
    import multiprocessing

    given = 0
    try:
        ctx = multiprocessing.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_read_aside, args=(path, send), daemon=True)
        proc.start()
    except (OSError, ValueError):
        proc = None
    if proc is not None:
        send.close()
        try:
            while True:
                try:
                    message = pickle.loads(recv.recv_bytes())
                except EOFError:
                    break  # the reader died: read here
                kind = message[0]
                if kind == "items":
                    for item in message[1]:
                        yield item
                        given += 1
                    continue
                if kind == "end":
                    return
                if kind == "yaml":
                    problem, where = message[1], message[2]
                    # No buffer: the mark shows no snippet, so its pointer is never read.
                    mark = yaml.Mark(where[0], -1, where[1], where[2], None, 0) if where else None
                    raise yaml.MarkedYAMLError(problem=problem, problem_mark=mark)
                if kind == "shape":
                    raise CasesShapeError(message[1])
                raise OSError(message[1], message[2])
        finally:
            recv.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()
    with open(path, "rb") as f:
        for n, item in enumerate(iter_raw_cases(f)):
            if n >= given:
                yield item
