"""How a handler builds its answer: one way, a `Shape` per kio response class and version.

Every answer is a kio entity. A handler gets the shape of its response with
`answer_shape(api_key, version)` (compiled once per class: which fields exist, and the value each
field left out takes, as Kafka's defaults give it), then either

- calls it with typed values, `shape(field=value, ...)`, on a hot path (Fetch, Produce,
  OffsetCommit): nothing is inspected or coerced per answer, the fields it leaves out take their
  compiled zeros; nested entities are built the same way from `shape.of("field")`; or
- builds it from a plain dict, `shape.build({...})` (what `apis.build_response` does), where
  convenience beats a microsecond: the values are coerced to the field types (ints to error codes
  and durations, lists to tuples, dicts to nested entities).

An answer sent many times unchanged (a heartbeat's) is then declared with
`connection.shared_answer`, which keeps its encoded bytes: that caches the bytes, not another way
to build.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any

from cluster.gateway.apis import build, entity_of, response_class, zeros


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Shape:
    cls: type
    zeros: dict[str, Any]  # fields without a default of their own, and the value each takes if left out
    fields: frozenset[str]

    def __call__(self, **values: Any) -> Any:
        """The entity from typed values (no coercion): what is left out takes its zero."""
        return self.cls(**{**self.zeros, **values})

    def build(self, data: dict[str, Any]) -> Any:
        """The entity from a plain dict, each value coerced to its field's type."""
        return build(self.cls, data)

    def has(self, field: str) -> bool:
        """Whether this version has the field (fields come and go between versions)."""
        return field in self.fields

    def of(self, field: str) -> "Shape":
        """The shape of the entities a field holds (an array's elements, or a nested entity)."""
        return _field_shape(self.cls, field)


@functools.cache
def entity_shape(cls: type) -> Shape:
    return Shape(cls, zeros(cls), frozenset(f.name for f in dataclasses.fields(cls)))


@functools.cache
def _field_shape(cls: type, field: str) -> Shape:
    entity, _ = entity_of(typing.get_type_hints(cls)[field])
    if entity is None:
        raise TypeError(f"{cls.__name__}.{field} holds no kio entity")
    return entity_shape(entity)


@functools.cache
def answer_shape(api_key: int, api_version: int) -> Shape:
    """The shape of an API's response at one version."""
    return entity_shape(response_class(api_key, api_version))


def build_response(api_key: int, api_version: int, data: dict[str, Any]) -> Any:
    """An API's answer from a plain dict (`Shape.build`)."""
    return answer_shape(api_key, api_version).build(data)
