"""A dict and a set that an operation's private group copy can take without copying them whole.

Every JoinGroup and SyncGroup edits a private copy of its group (coordinator/context.py). With
plain containers that copy is O(members), so a rebalance of n members cost O(n²) (issue 12). Here
a container is a shared base that is never changed once built, plus a small layer of changes of
its own: a copy shares the base and copies only the layer. When the layer outgrows about √n
entries the next copy folds it into a new base, so a copy costs O(√n) amortized, with C-speed dict
copies of a few dozen entries at n = 1,000.

Order is a dict's: a replaced key keeps its place, a new key goes last, a removed key that comes
back goes last (the leader election and the protocol vote depend on join order). That is why this is
written here: a persistent map from a library (immutables.Map, a HAMT) shares structure as well, but
iterates in hash order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from math import isqrt
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_GONE: Any = object()  # a base key removed in the layer
# The layer of a container with no changes, shared (most groups are idle): never written to; a
# container takes a dict of its own at its first change (_own_layer).
_NO_CHANGES: dict = {}
_MISSING: Any = object()


def _folds(layer: int, base: int) -> bool:
    return layer > 8 + isqrt(base)


class LayeredDict(Mapping[K, V], Generic[K, V]):
    __slots__ = ("_base", "_layer", "_len")

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._base: dict[K, V] = dict(items)
        self._layer: dict[K, V] = _NO_CHANGES
        self._len = len(self._base)

    def copy(self) -> "LayeredDict[K, V]":
        clone = LayeredDict.__new__(LayeredDict)
        if _folds(len(self._layer), len(self._base)):
            clone._base, clone._layer = self._folded(), _NO_CHANGES
        else:
            clone._base, clone._layer = self._base, dict(self._layer) if self._layer else _NO_CHANGES
        clone._len = self._len
        return clone

    def __copy__(self) -> "LayeredDict[K, V]":
        return self.copy()

    def compact(self) -> None:
        """Fold a layer that has grown to half the base: a replaced value in the layer keeps the
        old one alive in the base, so a group left as its last operation installed it (an idle
        group after SyncGroup replaced every member) would hold each member twice. O(n) once per
        n/2 changes, so O(1) amortized."""
        if self._layer and 2 * len(self._layer) >= len(self._base):
            self._base, self._layer = self._folded(), _NO_CHANGES

    def __deepcopy__(self, memo: dict) -> "LayeredDict[K, V]":
        import copy

        return LayeredDict(copy.deepcopy(dict(self.items()), memo))

    def __reduce__(self) -> tuple:
        return (LayeredDict, (dict(self.items()),))

    # -- reading ---------------------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        value = self._layer.get(key, _MISSING)
        if value is _MISSING:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def get(self, key: K, default: Any = None) -> Any:
        value = self._layer.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._layer.get(key, _MISSING)  # type: ignore[call-overload]
        if value is _MISSING:
            return key in self._base
        return value is not _GONE

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[K]:
        if not self._layer:
            return iter(self._base)
        return (k for k, _ in self._pairs())

    def _folded(self) -> dict[K, V]:
        """The base with the layer applied: a new dict, in a dict's order (a replaced key keeps its
        place; keys new to the base follow in the layer's order)."""
        folded = self._base.copy()
        for key, value in self._layer.items():
            if value is _GONE:
                del folded[key]
            else:
                folded[key] = value
        return folded

    def _pairs(self) -> Iterator[tuple[K, V]]:
        layer, base = self._layer, self._base
        for key, value in base.items():
            changed = layer.get(key, _MISSING)
            if changed is _MISSING:
                yield key, value
            elif changed is not _GONE:
                yield key, changed
        for key, value in layer.items():
            if value is not _GONE and key not in base:
                yield key, value

    def items(self) -> Any:
        return self._base.items() if not self._layer else list(self._pairs())

    def values(self) -> Any:
        return self._base.values() if not self._layer else [v for _, v in self._pairs()]

    def keys(self) -> Any:
        return self._base.keys() if not self._layer else [k for k, _ in self._pairs()]

    def __repr__(self) -> str:
        return f"LayeredDict({dict(self.items())!r})"

    # -- changing (only the layer: the base may be shared) -------------------------------------

    def __setitem__(self, key: K, value: V) -> None:
        layer = self._own_layer()
        current = layer.get(key, _MISSING)
        if current is _MISSING:
            if key not in self._base:
                self._len += 1
        elif current is _GONE:
            # A removed key that comes back goes last, as in a dict: fold so it is no longer a base key.
            self._base, self._layer = self._folded(), {}
            layer = self._layer
            self._len += 1
        layer[key] = value

    def pop(self, key: K, default: Any = _MISSING) -> Any:
        current = self._layer.get(key, _MISSING)
        if current is _GONE or (current is _MISSING and key not in self._base):
            if default is _MISSING:
                raise KeyError(key)
            return default
        if current is _MISSING:
            current = self._base[key]
        if key in self._base:
            self._own_layer()[key] = _GONE
        else:
            del self._layer[key]  # in the layer only: the layer is the container's own
        self._len -= 1
        return current

    def __delitem__(self, key: K) -> None:
        self.pop(key)

    def clear(self) -> None:
        self._base, self._layer, self._len = {}, _NO_CHANGES, 0

    def _own_layer(self) -> dict[K, V]:
        if self._layer is _NO_CHANGES:
            self._layer = {}
        return self._layer


class LayeredSet(Set[K], Generic[K]):
    """A set on a LayeredDict (the keys; the values are None)."""

    __slots__ = ("_map",)

    def __init__(self, items: Iterable[K] = ()) -> None:
        self._map: LayeredDict[K, None] = LayeredDict((k, None) for k in items)

    def copy(self) -> "LayeredSet[K]":
        clone = LayeredSet.__new__(LayeredSet)
        clone._map = self._map.copy()
        return clone

    def __copy__(self) -> "LayeredSet[K]":
        return self.copy()

    def compact(self) -> None:
        self._map.compact()

    def __deepcopy__(self, memo: dict) -> "LayeredSet[K]":
        return LayeredSet(list(self))

    def __reduce__(self) -> tuple:
        return (LayeredSet, (list(self),))

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"LayeredSet({list(self)!r})"

    def add(self, key: K) -> None:
        if key not in self._map:
            self._map[key] = None

    def discard(self, key: K) -> None:
        self._map.pop(key, None)

    def clear(self) -> None:
        self._map.clear()
