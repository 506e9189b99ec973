"""`message`: the decorator for the request and response types that cross a process boundary.

Every group request and answer is pickled once by its sender and unpickled once by its receiver
(the gateway and the coordinator actors talk through Ray). A frozen slots dataclass pickles by
default through `dataclasses`' generic state functions, which look up the fields on every load;
its class and a plain tuple of its fields load in under a third of the time (0.26 µs against 0.91
µs for a HeartbeatResponse here), and the bytes are smaller.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import TypeVar

T = TypeVar("T")


def message(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True, slots=True)` that pickles as `(cls, (field values, ...))`."""
    cls = dataclass(frozen=True, slots=True)(cls)
    names = [f.name for f in fields(cls)]
    if len(names) == 1:
        get = attrgetter(names[0])

        def __reduce__(self):  # noqa: N807
            return cls, (get(self),)
    else:
        values = attrgetter(*names) if names else (lambda _self: ())

        def __reduce__(self):  # noqa: N807
            return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls
