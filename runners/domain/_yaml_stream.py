"""An evaluation file's cases read one at a time from the YAML event stream: what the loader imports.

`iter_raw_cases` reads the cases (by libyaml's fast path where it can vouch for the result, `_yaml_fast`, otherwise
by the event path, `_yaml_events`), `count_cases` counts them from the events alone, `iter_raw_cases_aside` reads
them in a side process. Every path keeps the bounds of `_yaml_bounds` (`LimitError` past one).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from typing import IO, Any

import yaml
from yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent, StreamEndEvent

from runners.domain._yaml_bounds import LimitError, _reader
from runners.domain._yaml_events import CasesShapeError, DuplicateCasesKeyError, _event_cases
from runners.domain._yaml_fast import _as_binary, _fast_or_events, count_block_items

__all__ = [
    "CasesShapeError",
    "DuplicateCasesKeyError",
    "LimitError",
    "count_block_items",
    "count_cases",
    "iter_raw_cases",
    "iter_raw_cases_aside",
]


def iter_raw_cases(
    stream: IO[str] | IO[bytes] | str | bytes, *, use_c: bool = True, fast: bool = True
) -> Iterator[object]:
    """Each item of the document's top-level `cases` list, constructed as `yaml.safe_load` would, in order.

    Raises `yaml.YAMLError` (with its mark) where the stream is not valid YAML, `CasesShapeError` when the
    document is not a mapping with a `cases` list — both possibly after some cases were yielded, as the
    rest of the file is read only then. Everything around the list is read (and checked) too.

    With libyaml (`use_c`) and `fast`, a block list of cases is read a few cases at a time by libyaml's own
    composer (see `_fast_items`); whatever that path cannot vouch for is read again by the event path (`_yaml_events`),
    which alone says what is wrong and where, so the data and every message are the same either way.
    """
    if fast and use_c and yaml.__with_libyaml__:
        binary = _as_binary(stream)
        if binary is not None:
            yield from _fast_or_events(binary, stream)
            return
    yield from _event_cases(stream, use_c)


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
