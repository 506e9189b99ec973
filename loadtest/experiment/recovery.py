"""When each fault's targets work again, seen in the event stream as it goes by.

A target recovers at its first success asked for after the fault (a request sent before it may
have been answered by what the fault then hit): a group when the monitor sees it Stable, a
partition when a record is produced to it or handed over from it, a share partition when an
acknowledgement of it is durable, a gateway when a request to it is answered without error. Each
recovery becomes a `recovery` row with the time from the fault (docs/experiments.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class _Watch:
    fault_id: int
    since_ms: float  # successes before this do not count (a pause: from its end)
    started_ms: float  # latencies are measured from the injection
    groups: set[str] = field(default_factory=set)
    partitions: set[str] = field(default_factory=set)  # "topic-partition"
    share_partitions: set[str] = field(default_factory=set)  # "group:topic-partition"
    brokers: set[str] = field(default_factory=set)


class RecoveryWatch:
    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self.emit = emit
        self.watches: list[_Watch] = []
        self.recovered: dict[int, float] = {}  # fault id -> latest recovery latency seen

    def watch(self, fault_id: int, started_ms: float, since_ms: float, groups: list[str], partitions: list[str],
              share_partitions: list[str], brokers: list[str]) -> None:
        self.watches.append(_Watch(fault_id, since_ms, started_ms, set(groups), set(partitions),
                                   set(share_partitions), set(brokers)))

    def count_from(self, fault_id: int, since_ms: float) -> None:
        """Successes count from `since_ms` on: for a fault whose end is known only once it is over
        (a node loss ends when its partitions have moved; until then none counts)."""
        for w in self.watches:
            if w.fault_id == fault_id:
                w.since_ms = since_ms

    def pending(self, fault_id: int) -> int:
        return sum(len(w.groups) + len(w.partitions) + len(w.share_partitions) + len(w.brokers)
                   for w in self.watches if w.fault_id == fault_id)

    def observe(self, rows: list[dict[str, Any]]) -> None:
        if not self.watches:
            return
        for row in rows:
            kind = row["kind"]
            if kind == "group_state":
                if row.get("state") == "Stable":
                    self._hit(row, "groups", row["group"])
            elif kind in ("produce", "delivery"):
                self._hit(row, "partitions", f"{row['topic']}-{row['partition']}")
            elif kind == "ack":
                if row.get("error") == "NONE":
                    self._hit(row, "share_partitions", f"{row['group']}:{row['topic']}-{row['partition']}")
            elif kind == "response":
                if row.get("error") == "NONE":
                    self._hit(row, "brokers", row.get("broker"))

    def _hit(self, row: dict[str, Any], attr: str, target: str | None) -> None:
        if target is None:
            return
        done = []
        for w in self.watches:
            targets = getattr(w, attr)
            asked = row.get("request_time") or row["time"]
            if target in targets and asked > w.since_ms:
                targets.discard(target)
                latency = row["time"] - w.started_ms
                self.recovered[w.fault_id] = max(self.recovered.get(w.fault_id, 0.0), latency)
                self.emit({"time": row["time"], "kind": "recovery", "role": "runner", "fault_id": w.fault_id,
                           "target": target, "latency_ms": latency})
                if not (w.groups or w.partitions or w.share_partitions or w.brokers):
                    done.append(w)
        for w in done:
            self.watches.remove(w)
