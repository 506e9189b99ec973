"""Consumer groups under failures, with real consumers in their own processes.

- A consumer killed with SIGKILL loses its partitions to the others after its session timeout;
  they continue from its committed offsets (nothing skipped, at most the uncommitted record again).
- A consumer that closes cleanly (LeaveGroup) triggers an immediate rebalance.
- Killing the coordinator actor that leads the group's partition: the members keep their
  generation (no rebalance, no revocation), and committed offsets are neither lost nor moved back.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cluster.admin_client import admin_call
from coordinator.hashing import group_partition
from tests.clients import confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess

pytestmark = pytest.mark.slow
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("group-failover"), "--config", "group.initial.rebalance.delay.ms=300"
    ).start()
    yield proc
    proc.stop()


class ConsumerProcess:
    def __init__(self, bootstrap: str, group: str, topic: str, out: Path, session_ms: int) -> None:
        self.out = out
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.consumer_proc", "--bootstrap", bootstrap, "--group", group,
             "--topic", topic, "--out", str(out), "--session-ms", str(session_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.strip()))

    def assignment(self) -> set[int]:
        assigned = [l for _, l in self.lines if l.startswith("ASSIGNED")]
        revoked_after = False
        if assigned:
            last = max(i for i, (_, l) in enumerate(self.lines) if l.startswith("ASSIGNED"))
            revoked_after = any(l.startswith("REVOKED") for _, l in self.lines[last + 1 :])
        if not assigned or revoked_after:
            return set()
        text = assigned[-1].split(" ", 1)[1] if " " in assigned[-1] else ""
        return {int(p) for p in text.split(",") if p}

    def rebalances(self) -> int:
        return sum(1 for _, l in self.lines if l.startswith(("ASSIGNED", "REVOKED")))

    def consumed(self) -> list[tuple[int, int]]:
        if not self.out.exists():
            return []
        return [tuple(map(int, line.split())) for line in self.out.read_text().splitlines() if line.strip()]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


def wait_until(condition, timeout: float = 60, step: float = 0.2) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(step)
    return False


MOVING = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)}
    finally:
        consumer.close()


def start_group(cluster, tmp_path: Path, group: str, topic: str, n: int, session_ms: int) -> list[ConsumerProcess]:
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    consumers = [ConsumerProcess(cluster.bootstrap, group, topic, tmp_path / f"{group}-{i}.txt", session_ms) for i in range(n)]
    assert wait_until(lambda: sum(len(c.assignment()) for c in consumers) == PARTITIONS and all(c.assignment() for c in consumers), 90)
    return consumers


def test_a_killed_consumer_loses_its_partitions_after_its_session_timeout(cluster, tmp_path):
    group, topic, session_ms = "sigkill", "sigkill-topic", 6_000
    consumers = start_group(cluster, tmp_path, group, topic, 3, session_ms)
    try:
        confluent_produce(cluster.bootstrap, topic, records(600, PARTITIONS, "first"))
        assert wait_until(lambda: sum(len(c.consumed()) for c in consumers) >= 600)
        victim, survivors = consumers[0], consumers[1:]
        lost = victim.assignment()
        killed_at = time.time()
        victim.stop(signal.SIGKILL)
        confluent_produce(cluster.bootstrap, topic, records(600, PARTITIONS, "second"))
        assert wait_until(lambda: set().union(*(c.assignment() for c in survivors)) == set(range(PARTITIONS)), 60)
        moved_at = max(t for c in survivors for t, l in c.lines if l.startswith("ASSIGNED"))
        # Not before the session timeout: the coordinator noticed the silence, not the disconnect.
        assert moved_at - killed_at >= session_ms / 1000 - 1.0, moved_at - killed_at
        assert wait_until(lambda: len(set().union(*(set(c.consumed()) for c in consumers))) >= 1200, 60)
    finally:
        for c in consumers:
            c.stop()
    seen = Counter(rec for c in consumers for rec in c.consumed())
    assert set(seen) == {(p, o) for p in range(PARTITIONS) for o in range(200)}  # nothing skipped
    duplicated = {p for (p, _), n in seen.items() if n > 1}
    # Only the killed member's partitions may see a record again: the one in flight between its
    # write and its commit; survivors continued from its committed offsets.
    assert duplicated <= lost
    assert all(sum(n - 1 for (p, _), n in seen.items() if p == part) <= 1 for part in lost)
    assert committed(cluster.bootstrap, group, topic) == {p: 200 for p in range(PARTITIONS)}


def test_a_clean_close_triggers_an_immediate_rebalance(cluster, tmp_path):
    group, topic = "clean-close", "clean-close-topic"
    consumers = start_group(cluster, tmp_path, group, topic, 2, session_ms=30_000)
    try:
        leaving, staying = consumers
        closed_at = time.time()
        leaving.stop(signal.SIGTERM)  # consumer.close(): LeaveGroup
        assert wait_until(lambda: staying.assignment() == set(range(PARTITIONS)), 20)
        moved_at = max(t for t, l in staying.lines if l.startswith("ASSIGNED"))
        assert moved_at - closed_at < 10, "the rebalance waited for a session timeout (30 s) instead of LeaveGroup"
    finally:
        for c in consumers:
            c.stop()


def test_killing_the_group_coordinator_keeps_the_generation_and_the_offsets(cluster, tmp_path):
    group, topic = "coordinator-failover", "coordinator-failover-topic"
    consumers = start_group(cluster, tmp_path, group, topic, 2, session_ms=6_000)
    stop = threading.Event()
    offsets_seen: list[dict[int, int]] = []
    unexpected: list[Exception] = []

    def produce_and_watch() -> None:
        n = 0
        while not stop.is_set():
            confluent_produce(cluster.bootstrap, topic, records(60, PARTITIONS, f"batch{n}"))
            try:
                offsets_seen.append(committed(cluster.bootstrap, group, topic))
            except KafkaException as exc:
                # While the coordinator moves, OffsetFetch answers these, as Kafka's does, and
                # committed() raises them: ask again next round. Before, the first one ended this
                # thread, and with it the records the consumers were to keep consuming.
                if exc.args[0].code() not in MOVING:
                    unexpected.append(exc)
            n += 1
            time.sleep(0.3)

    worker = threading.Thread(target=produce_and_watch)
    worker.start()
    try:
        assert wait_until(lambda: all(len(c.consumed()) > 50 for c in consumers))
        rebalances_before = [c.rebalances() for c in consumers]
        owner = _owner_of(cluster, group_partition(group, 50))
        assert cluster.cli("kill", owner).returncode == 0
        consumed_before = [len(c.consumed()) for c in consumers]
        time.sleep(15)  # more than two session timeouts
        assert cluster.wait_for_event(f"partitions of {owner} moved")
        # No rebalance: nobody was revoked or reassigned, and both kept consuming.
        assert [c.rebalances() for c in consumers] == rebalances_before
        assert all(len(c.consumed()) > before for c, before in zip(consumers, consumed_before))
    finally:
        stop.set()
        worker.join(60)
        for c in consumers:
            c.stop()
    assert not unexpected, unexpected
    # Committed offsets only ever moved forward, failover included.
    valid = [o for o in offsets_seen if all(v >= 0 for v in o.values())]
    for earlier, later in zip(valid, valid[1:]):
        assert all(later[p] >= earlier[p] for p in range(PARTITIONS)), (earlier, later)


def _owner_of(cluster, partition: int) -> str:
    status = admin_call(cluster.bootstrap, "status")
    return next(l["actor"] for l in status["leaders"] if l["topic"] == "__consumer_offsets" and l["partition"] == partition)
