"""Which actor `raygroups kill --coordinator-of GROUP` / `--leader-of TOPIC-PARTITION` means, from the
controller's status (its topics and per-partition leadership map)."""

from __future__ import annotations

from typing import Any

from coordinator.hashing import group_partition

OFFSETS_TOPIC = "__consumer_offsets"


class KillTargetError(ValueError):
    pass


def kill_target(status: dict[str, Any], coordinator_of: str | None = None, leader_of: str | None = None) -> str:
    if coordinator_of is not None:
        partitions = _partitions(status, OFFSETS_TOPIC)
        return _leader(status, OFFSETS_TOPIC, group_partition(coordinator_of, partitions),
                       f"group {coordinator_of!r}")
    assert leader_of is not None
    topic, partition = parse_topic_partition(leader_of)
    if partition >= _partitions(status, topic):
        raise KillTargetError(f"--leader-of: {topic} has {_partitions(status, topic)} partitions, no partition {partition}")
    return _leader(status, topic, partition, leader_of)


def parse_topic_partition(text: str) -> tuple[str, int]:
    topic, sep, partition = text.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise KillTargetError(f"--leader-of: expected TOPIC-PARTITION such as orders-3, got {text!r}")
    return topic, int(partition)


def _partitions(status: dict[str, Any], topic: str) -> int:
    for t in status["topics"]:
        if t["name"] == topic:
            return int(t["partitions"])
    raise KillTargetError(f"no topic {topic!r} in the cluster")


def _leader(status: dict[str, Any], topic: str, partition: int, what: str) -> str:
    for lead in status["leaders"]:
        if lead["topic"] == topic and lead["partition"] == partition:
            return lead["actor"]
    raise KillTargetError(f"{what}: {topic}-{partition} has no leader right now (failing over?); try again")
