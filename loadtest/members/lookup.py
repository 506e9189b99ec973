"""What a client must look up before it can talk to its group or its partitions.

`CoordinatorLookup`: FindCoordinator for one key, retried with backoff; work that needs the
coordinator waits in a queue until it is known, and a coordinator error (NOT_COORDINATOR, a lost
connection) forgets it so the next piece of work looks it up again (Kafka's
`markCoordinatorUnknown`).

`MetadataCache`: partition counts, leaders and brokers of the topics a client uses, by name or by
topic id (share assignments name topics by id), refreshed on demand; one Metadata request in
flight at a time, and callers waiting for it are called back when it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey

if TYPE_CHECKING:  # pragma: no cover
    from loadtest.members.machine import Broker, Machine, Millis, Pending

Then = Callable[["Millis"], None]


class CoordinatorLookup:
    LANE = "coordinator"

    def __init__(self, machine: "Machine", key: str, key_type: int = 0) -> None:
        self.machine = machine
        self.key = key
        self.key_type = key_type
        self.broker: "Broker | None" = None
        self._waiting: list[Then] = []
        self._finding = False

    def then(self, now: "Millis", work: Then) -> None:
        """Run `work` once the coordinator is known (now, if it is)."""
        if self.broker is not None:
            work(now)
            return
        self._waiting.append(work)
        self._find(now)

    def lost(self, now: "Millis") -> None:
        """Forget the coordinator (an error said it moved, or its connection broke)."""
        if self.broker is not None:
            self.machine.close_connection(self.broker, self.LANE)
        self.broker = None

    def _find(self, now: "Millis") -> None:
        if self._finding or self.machine.stopped:
            return
        self._finding = True
        body = {"key_type": self.key_type, "coordinator_keys": [self.key]}
        self.machine.send(now, ApiKey.FIND_COORDINATOR, 4, body, self.machine.any_broker(), "bootstrap", self._on_found)

    def _on_found(self, response: Any, error: ErrorCode, now: "Millis", _pending: "Pending") -> None:
        from loadtest.members.machine import Broker

        self._finding = False
        if error == ErrorCode.none and response is not None:
            entry = response.coordinators[0]
            self.broker = Broker(entry.host, entry.port)
            waiting, self._waiting = self._waiting, []
            for work in waiting:
                work(now)
            return
        self.machine.after("find-coordinator", now + self.machine.retry_backoff_ms, self._find)


class MetadataCache:
    def __init__(self, machine: "Machine") -> None:
        self.machine = machine
        self.brokers: dict[int, "Broker"] = {}
        self.partitions: dict[str, int] = {}  # topic -> partition count
        self.leaders: dict[tuple[str, int], "Broker"] = {}  # (topic, partition) -> broker
        self.names: dict[Any, str] = {}  # topic id -> name
        self.ids: dict[str, Any] = {}  # name -> topic id
        self._inflight = False
        self._waiting: list[Then] = []
        self._wanted_names: set[str] = set()
        self._wanted_ids: set[Any] = set()

    def refresh(self, now: "Millis", names: list[str] = (), ids: list[Any] = (), then: Then | None = None) -> None:
        self._wanted_names.update(names)
        self._wanted_ids.update(ids)
        if then is not None:
            self._waiting.append(then)
        if self._inflight or self.machine.stopped:
            return
        self._inflight = True
        topics = [{"name": n, "topic_id": None} for n in sorted(self._wanted_names)]
        known = set(self.ids.get(n) for n in self._wanted_names)
        topics += [{"name": None, "topic_id": t} for t in self._wanted_ids if t not in known]
        body = {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        self.machine.send(now, ApiKey.METADATA, 12, body, self.machine.any_broker(), "bootstrap", self._on_metadata)

    def forget_leader(self, topic: str, partition: int) -> None:
        self.leaders.pop((topic, partition), None)

    def _on_metadata(self, response: Any, error: ErrorCode, now: "Millis", _pending: "Pending") -> None:
        from loadtest.members.machine import Broker

        self._inflight = False
        if response is None:
            self.machine.after("metadata", now + self.machine.retry_backoff_ms, lambda t: self.refresh(t))
            return
        self.brokers = {b.node_id: Broker(b.host, b.port) for b in response.brokers}
        complete = True
        for t in response.topics:
            if t.error_code != ErrorCode.none:
                complete = False
                continue
            self.partitions[t.name] = len(t.partitions)
            self.names[t.topic_id] = t.name
            self.ids[t.name] = t.topic_id
            for p in t.partitions:
                broker = self.brokers.get(p.leader_id) if p.error_code == ErrorCode.none else None
                if broker is None:
                    complete = False
                    self.leaders.pop((t.name, p.partition_index), None)
                else:
                    self.leaders[(t.name, p.partition_index)] = broker
        waiting, self._waiting = self._waiting, []
        for work in waiting:
            work(now)
        if not complete:  # a leader is moving or a topic is not there yet: look again shortly
            self.machine.after("metadata", now + self.machine.retry_backoff_ms, lambda t: self.refresh(t))
