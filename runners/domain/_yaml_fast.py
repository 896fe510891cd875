"""The fast path: a block list of cases composed by libyaml itself, a few cases at a time.

The event path (`_yaml_events`) composes in Python, ~60% of a load. With libyaml, a block list of cases (the usual
file) takes a fast path instead: its items are split at their lines and composed by libyaml itself a few cases at a
time (`_fast_items`); the event path takes over, from the first item not yet handed out, wherever the fast path
cannot vouch for the result (an alias across items, a directive, an odd line), so both give the same data and
the same errors with the same marks (`tests/runners/domain/test_evalset_stream.py` compares them on every built-in
file). The batches are held to the bounds of `_yaml_bounds` (`_walk_batch`, `_build`), read from there.
"""

from __future__ import annotations

import gc
import io
import re
from collections.abc import Iterator
from typing import IO, Any, TypeGuard

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import MappingStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from runners.domain import _yaml_bounds
from runners.domain._yaml_bounds import _reader, _stream_size
from runners.domain._yaml_events import _STR_TAG, CasesShapeError, _cases, _event_cases

if yaml.__with_libyaml__:
    from yaml._yaml import CParser

__all__ = ["count_block_items"]


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
    if len(active) + _BATCH_DEPTH > _yaml_bounds.MAX_DEPTH:
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
        self.allowance = _yaml_bounds._ALIAS_NODES_FREE + size
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
                        aliases > _yaml_bounds.MAX_ALIASES_PER_UNIT
                        or alias_nodes > _yaml_bounds.MAX_ALIAS_NODES_PER_UNIT
                        or counts.alias_nodes > counts.allowance
                    ):
                        raise _Doubt
                return added
            if isinstance(node, ScalarNode):
                sizes[key] = 1
                return 1
            if depth > _yaml_bounds.MAX_DEPTH:
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
