"""JSON read from a file a piece at a time, with memory bounded by the largest single value read, not by the file.

A trace file can be gigabytes on one line (one OTLP/JSON request holding every span) or millions of lines: the
readers walk the structure they expect (`JsonCursor.members` over an object's keys, `JsonCursor.items` over an
array's items) and decode only the values they keep (`JsonCursor.value`: a span, a resource, an event-log line),
each with the standard library's decoder (`json.JSONDecoder.raw_decode`) over a window of the file that grows only
while a value is incomplete — no dependency beyond the standard library, and the same strictness as `strict_json`
(a key given twice in one object is refused). Every problem is a `JsonStreamError` naming the line it is on.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

from runners.interchange._trace_values import strict_decoder

__all__ = ["MAX_VALUE_CHARS", "JsonCursor", "JsonStreamError"]

MAX_VALUE_CHARS = 64 * 1024 * 1024
"""The largest single value a reader decodes (a span, a resource, an event-log line): what memory is bounded by."""
_CHUNK = 1024 * 1024
_WHITESPACE = " \t\r\n"
_NUMBER_START = frozenset("-0123456789")
_NUMBER_MORE = frozenset("0123456789+-.eE")


class JsonStreamError(ValueError):
    """The file is not the JSON expected at a line (or not UTF-8): the line, and what is wrong there."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"{line}: {problem}")
        self.line = line
        """The file's line (from 1) the problem is on."""
        self.problem = problem
        """What is wrong there."""


class JsonCursor:
    """A position in a UTF-8 file of JSON, read forward in chunks; `line` is the line of the next character."""

    def __init__(self, stream: IO[bytes], *, chunk: int | None = None, max_value: int = MAX_VALUE_CHARS) -> None:
        self._stream = stream
        self._decode = codecs.getincrementaldecoder("utf-8")()
        self._chunk = chunk or _CHUNK
        self._max_value = max_value
        self._buf = ""
        self._pos = 0
        self._bytes = 0
        self._eof = False
        self._decoder = strict_decoder()
        self.line = 1
        """The line (from 1) the next character is on."""

    # the window ---------------------------------------------------------------------------------------------------
    def _more(self, wanted: int) -> bool:
        """Read at least `wanted` more characters (fewer at the end of the file); False when nothing was left."""
        if self._eof:
            return False
        self._buf = self._buf[self._pos :]
        self._pos = 0
        start = len(self._buf)
        while len(self._buf) - start < wanted and not self._eof:
            data = self._stream.read(max(self._chunk, wanted))
            try:
                self._buf += self._decode.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise JsonStreamError(self.line, f"not UTF-8 text (byte {self._bytes + exc.start})") from None
            self._bytes += len(data)
            self._eof = not data
        return len(self._buf) > start

    def _advance(self, to: int) -> None:
        self.line += self._buf.count("\n", self._pos, to)
        self._pos = to

    def peek(self) -> str:
        """The next character that is not JSON whitespace (consumed up to it); empty at the end of the file."""
        while True:
            buf, pos = self._buf, self._pos
            n = len(buf)
            while pos < n and buf[pos] in _WHITESPACE:
                pos += 1
            self._advance(pos)
            if pos < n:
                return buf[pos]
            if not self._more(self._chunk):
                return ""

    def next_line(self) -> None:
        """Past the rest of the current line, which must be blank (a value ends its line)."""
        while True:
            buf, pos = self._buf, self._pos
            n = len(buf)
            while pos < n and buf[pos] in " \t\r":
                pos += 1
            self._advance(pos)
            if pos < n:
                if buf[pos] != "\n":
                    raise JsonStreamError(self.line, f"not JSON (extra data after the value: {buf[pos]!r})")
                self._advance(pos + 1)
                return
            if not self._more(self._chunk):
                return

    def expect(self, char: str, what: str) -> None:
        """Past `char` (the next non-blank character), else JsonStreamError saying `what` was due."""
        found = self.peek()
        if found != char:
            shown = repr(found) if found else "the end of the file"
            raise JsonStreamError(self.line, f"not JSON ({what} expected, found {shown})")
        self._advance(self._pos + 1)

    def value(self) -> Any:
        """The next JSON value, decoded (objects refusing a key given twice), the window grown while it is cut."""
        if not self.peek():
            raise JsonStreamError(self.line, "not JSON (a value expected, found the end of the file)")
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._grow():
                    continue
                line = self.line + self._buf.count("\n", self._pos, exc.pos)
                why = exc.msg.removesuffix(" at").removesuffix(" starting")
                raise JsonStreamError(line, f"not JSON ({why})") from None
            except RecursionError:
                raise JsonStreamError(self.line, "JSON nested too deep") from None
            except ValueError as exc:  # a key given twice
                raise JsonStreamError(self.line, f"not JSON ({exc})") from None
            if self._buf[self._pos] in _NUMBER_START and (end == len(self._buf) or self._buf[end] in _NUMBER_MORE):
                if self._grow():
                    continue  # a number the window's end cut (`1` of `1e+16`) goes on past it
            self._advance(end)
            return value

    def _grow(self) -> bool:
        """Widen the window (doubling it: decoding a long value again costs no more than twice its length);
        False at the end of the file; JsonStreamError past `max_value`."""
        held = len(self._buf) - self._pos
        if held > self._max_value:
            raise JsonStreamError(self.line, f"a single JSON value over {self._max_value:,} characters")
        return self._more(max(held, self._chunk))

    # structure ----------------------------------------------------------------------------------------------------
    def members(self, what: str) -> Iterator[str]:
        """The keys of the object that comes next (`what` names it), each given once; the caller reads each key's
        value (`value`, `items`, `members`) before asking for the next key."""
        self.expect("{", f"{what}: an object")
        seen: set[str] = set()
        if self.peek() == "}":
            self._advance(self._pos + 1)
            return
        while True:
            if self.peek() != '"':
                raise JsonStreamError(self.line, f"not JSON ({what}: a key in double quotes expected)")
            key = self.value()
            if key in seen:
                raise JsonStreamError(self.line, f"not JSON (key {key!r} given twice in one object)")
            seen.add(key)
            self.expect(":", f"{what}: ':' after key {key!r}")
            yield key
            sep = self.peek()
            if sep not in (",", "}"):
                raise JsonStreamError(self.line, f"not JSON ({what}: ',' or '}}' expected after a member)")
            self._advance(self._pos + 1)
            if sep == "}":
                return

    def items(self, what: str) -> Iterator[int]:
        """The positions of the array that comes next (`what` names it); the caller reads each item before asking
        for the next."""
        self.expect("[", f"{what}: an array")
        if self.peek() == "]":
            self._advance(self._pos + 1)
            return
        n = 0
        while True:
            yield n
            n += 1
            sep = self.peek()
            if sep not in (",", "]"):
                raise JsonStreamError(self.line, f"not JSON ({what}: ',' or ']' expected after an item)")
            self._advance(self._pos + 1)
            if sep == "]":
                return

    def null(self) -> bool:
        """Past a `null` that comes next, if one does (protobuf's JSON reads it as a field left unset)."""
        if self.peek() == "n":
            self.value()  # `null`, or refused as not JSON
            return True
        return False
