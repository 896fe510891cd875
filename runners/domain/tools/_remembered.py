"""A bounded, thread-safe memo of values derived from immutable inputs, shared by the tools' caches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Remembered(Generic[K, V]):
    """At most `size` values by key; the least recently asked for goes first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, build: Callable[[], V]) -> V:
        """The value of `key`, built by `build` on a miss. The build runs outside the lock (a rare duplicate build
        beats serialising every build); one that raises leaves nothing remembered."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        built = build()
        with self._lock:
            self._items[key] = built
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return built

    def clear(self) -> None:
        """Forget every value."""
        with self._lock:
            self._items.clear()
