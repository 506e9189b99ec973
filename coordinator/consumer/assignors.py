"""The consumer group's server-side assignors by name (Kafka 4.2's `group.consumer.assignors`, whose
first entry is the default; a member may name another in ConsumerGroupHeartbeat's ServerAssignor).

- `uniform` (Kafka's UniformAssignor): the homogeneous builder when every member subscribes to the
  same topics, the heterogeneous one otherwise (uniform_homogeneous.py, uniform_heterogeneous.py);
- `range` (Kafka's RangeAssignor, range_assignor.py): co-partitioned ranges per topic.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.consumer.assignment_spec import Assignment, GroupSpec, TopicDescriber
from coordinator.consumer.range_assignor import assign_range
from coordinator.consumer.uniform_heterogeneous import assign_heterogeneous
from coordinator.consumer.uniform_homogeneous import assign_homogeneous

Assignor = Callable[[GroupSpec, TopicDescriber], Assignment]


def assign_uniform(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """Kafka's UniformAssignor.assign: nothing for no members; else the builder for the kind of
    subscriptions the group has."""
    if not spec.members:
        return {}
    if spec.homogeneous:
        return assign_homogeneous(spec, topics)
    return assign_heterogeneous(spec, topics)


ASSIGNORS: dict[str, Assignor] = {"uniform": assign_uniform, "range": assign_range}
DEFAULT_ASSIGNORS = ("uniform", "range")  # Kafka's group.consumer.assignors default order


def assignor(name: str) -> Assignor:
    """The assignor of this name; KeyError names the known ones (the config check reports it)."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise KeyError(f"unknown consumer group assignor {name!r} (known: {', '.join(ASSIGNORS)})") from None
