"""When each fault's targets work again, seen in the event stream as it goes by.

A target recovers at its first success asked for after the fault (a request sent before it may
have been answered by what the fault then hit): a group when the monitor sees it Stable, a
partition when a record is produced to it or handed over from it, a share partition when an
acknowledgement of it is durable, a gateway when a request to it is answered without error. Each
recovery becomes a `recovery` row with the time from the fault (docs/experiments.md).

A fault that takes leadership away (a kill, a move, a restart, a node loss) is not over when it is
injected: a killed actor goes on answering until Ray has stopped it, often for a tenth of a second
or more. For such a target, the partition whose leadership it waits for (its coordinator's
partition, its share coordinator's, or the partition itself) is named, and its successes count only
from the `released` instant of that partition's first leadership change after the injection, as
the controller recorded it (loadtest/experiment/leadership.py). Until that change is known (the
runner polls the controller), the successes seen are kept, and judged when it arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadtest.experiment.leadership import Change

TP = tuple[str, int]
ATTRS = ("groups", "partitions", "share_partitions", "brokers")


@dataclass(slots=True)
class _Watch:
    fault_id: int
    since_ms: float  # successes before this do not count (a pause: from its end)
    started_ms: float  # latencies are measured from the injection
    groups: set[str] = field(default_factory=set)
    partitions: set[str] = field(default_factory=set)  # "topic-partition"
    share_partitions: set[str] = field(default_factory=set)  # "group:topic-partition"
    brokers: set[str] = field(default_factory=set)
    waits_for: dict[str, TP] = field(default_factory=dict)  # target -> the partition whose new leader it needs
    released_ms: dict[str, float] = field(default_factory=dict)  # target -> successes count from here
    early: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # target -> (asked, seen) before then

    def open(self) -> bool:
        return bool(self.groups or self.partitions or self.share_partitions or self.brokers)


class RecoveryWatch:
    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self.emit = emit
        self.watches: list[_Watch] = []
        self.recovered: dict[int, float] = {}  # fault id -> latest recovery latency seen

    def watch(self, fault_id: int, started_ms: float, since_ms: float, groups: list[str], partitions: list[str],
              share_partitions: list[str], brokers: list[str], waits_for: dict[str, TP] | None = None) -> None:
        """`waits_for`: target -> the partition whose leadership change it waits for (empty when
        the fault moves no leadership, or the cluster records no changes)."""
        self.watches.append(_Watch(fault_id, since_ms, started_ms, set(groups), set(partitions),
                                   set(share_partitions), set(brokers), dict(waits_for or {})))

    def count_from(self, fault_id: int, since_ms: float) -> None:
        """Successes count from `since_ms` on: for a fault whose end is known only once it is over
        (a node loss ends when its partitions have moved; until then none counts)."""
        for w in self.watches:
            if w.fault_id == fault_id:
                w.since_ms = since_ms

    def pending(self, fault_id: int) -> int:
        return sum(len(w.groups) + len(w.partitions) + len(w.share_partitions) + len(w.brokers)
                   for w in self.watches if w.fault_id == fault_id)

    def leadership_changed(self, change: Change) -> None:
        """A leadership change the controller made: the targets waiting for it learn from when their
        successes count, and the earliest success already seen after that is their recovery."""
        for w in list(self.watches):
            if change.began_ms < w.started_ms:
                continue  # an earlier change: the fault's own comes after its injection
            for target, tp in w.waits_for.items():
                if tp != change.tp or target in w.released_ms:
                    continue
                w.released_ms[target] = change.released_ms
                seen = [at for asked, at in w.early.pop(target, ()) if asked > change.released_ms]
                attr = next((a for a in ATTRS if target in getattr(w, a)), None)
                if seen and attr is not None:
                    self._recovered(w, attr, target, min(seen))

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
        asked = row.get("request_time") or row["time"]
        for w in list(self.watches):
            if target not in getattr(w, attr) or asked <= w.since_ms:
                continue
            if target in w.waits_for:
                released = w.released_ms.get(target)
                if released is None:
                    w.early.setdefault(target, []).append((asked, row["time"]))
                    continue
                if asked <= released:
                    continue  # may have been answered by the leader the fault took away
            self._recovered(w, attr, target, row["time"])

    def _recovered(self, w: _Watch, attr: str, target: str, at_ms: float) -> None:
        getattr(w, attr).discard(target)
        latency = at_ms - w.started_ms
        self.recovered[w.fault_id] = max(self.recovered.get(w.fault_id, 0.0), latency)
        self.emit({"time": at_ms, "kind": "recovery", "role": "runner", "fault_id": w.fault_id,
                   "target": target, "latency_ms": latency})
        if not w.open() and w in self.watches:
            self.watches.remove(w)
