"""KIP-848's consumer protocol with real clients: confluent-kafka consumers with
`group.protocol=consumer`, each in its own process (tests/consumer_protocol_proc.py).

- A group of processes consumes a topic to its end, committing as it goes: every record once.
- A member joins and then leaves while the others keep consuming: they give up only what moves to
  or comes from that member, never their whole assignment, and keep consuming throughout.
- The coordinator actor of the group is killed: the failover replays the group's records, and no
  member's epoch or assignment changes (no partition is revoked or added).
- A regex subscription picks up a topic created later.
- Online migration: classic members, then consumer-protocol members join the same group (which
  becomes a consumer group), then the classic ones leave: every record is consumed, and a record
  is consumed twice only where Kafka allows it (its first consumer's commit was refused by the
  rebalance, so the next owner starts before it).
"""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
import sys
import threading
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from cluster.admin_client import admin_call
from cluster.gateway.apis import ApiKey
from coordinator.hashing import group_partition
from tests.clients import confluent_produce, create_topic, records
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient

pytestmark = pytest.mark.slow
PARTITIONS = 6
SESSION_MS = 6_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("consumer-protocol"),
        "--config", "group.consumer.heartbeat.interval.ms=500",
        "--config", "group.consumer.min.heartbeat.interval.ms=500",
        "--config", f"group.consumer.session.timeout.ms={SESSION_MS}",
        "--config", f"group.consumer.min.session.timeout.ms={SESSION_MS}",
    ).start()
    yield proc
    proc.stop()


class Member:
    """A consumer process: its assignment as the ADDED/REVOKED lines tell it, and what it consumed."""

    def __init__(self, bootstrap: str, group: str, topic: str, out: Path, protocol: str = "consumer") -> None:
        self.out = out
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.consumer_protocol_proc", "--bootstrap", bootstrap, "--group", group,
             "--topic", topic, "--out", str(out), "--protocol", protocol],
            stdout=subprocess.PIPE, stderr=open(str(out) + ".log", "w"), text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.strip()))

    def events(self, since: float = 0.0) -> list[tuple[str, set[tuple[str, int]]]]:
        out = []
        for at, line in list(self.lines):
            kind, _, rest = line.partition(" ")
            if at >= since and kind in ("ADDED", "REVOKED"):
                parts = {(tp.rsplit(":", 1)[0], int(tp.rsplit(":", 1)[1])) for tp in rest.split(",") if tp}
                out.append((kind, parts))
        return out

    def errors(self) -> list[str]:
        return [line for _, line in list(self.lines) if line.startswith("ERROR")]

    def failed_commits(self) -> set[tuple[str, int, int]]:
        out = set()
        for _, line in list(self.lines):
            if line.startswith("COMMIT-FAILED"):
                _, t, p, o, _name = line.split()
                out.add((t, int(p), int(o)))
        return out

    def assignment(self) -> set[tuple[str, int]]:
        owned: set[tuple[str, int]] = set()
        for kind, parts in self.events():
            owned = owned | parts if kind == "ADDED" else owned - parts
        return owned

    def consumed(self) -> list[tuple[str, int, int]]:
        if not self.out.exists():
            return []
        rows = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                rows.append((parts[0], int(parts[1]), int(parts[2])))
        return rows

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


class Producing:
    """Records produced to a topic in the background, 30 at a time every 0.2 s, until stopped;
    `produced` holds what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, tag: str) -> None:
        self.produced: list = []
        self._stop = threading.Event()

        def run() -> None:
            n = 0
            while not self._stop.is_set():
                self.produced.extend(confluent_produce(bootstrap, topic, records(30, PARTITIONS, f"{tag}{n}")))
                n += 1
                time.sleep(0.2)

        self._thread = threading.Thread(target=run)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def wait_until(condition, timeout: float = 90, step: float = 0.2) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(step)
    return False


def formed(members: list[Member], topic: str, partitions: int = PARTITIONS) -> bool:
    shares = [m.assignment() for m in members]
    every = {(topic, p) for p in range(partitions)}
    return all(shares) and set().union(*shares) == every and sum(map(len, shares)) == partitions


def describe(bootstrap: str, group: str) -> dict[str, tuple[int, frozenset]]:
    """member id -> (member epoch, assigned partitions), by ConsumerGroupDescribe."""
    client = KioClient(bootstrap)
    try:
        answer = client.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    finally:
        client.close()
    [g] = answer.groups
    assert g.error_code == ErrorCode.none, g
    return {
        m.member_id: (m.member_epoch, frozenset((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions))
        for m in g.members
    }


def test_a_group_consumes_a_topic_to_its_end_with_commits(cluster, tmp_path):
    group, topic = "cp-drain", "cp-drain-topic"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    produced = confluent_produce(cluster.bootstrap, topic, records(600, PARTITIONS, "drain"))
    members = [Member(cluster.bootstrap, group, topic, tmp_path / f"drain-{i}.txt") for i in range(3)]
    try:
        assert wait_until(lambda: len({(t, p, o) for m in members for t, p, o in m.consumed()}) == len(produced))
        assert wait_until(lambda: formed(members, topic))
    finally:
        for m in members:
            m.stop()
    consumed = [row for m in members for row in m.consumed()]
    assert sorted(consumed) == sorted({(topic, r.partition, r.offset) for r in produced}), "a record consumed twice or never"
    assert not [e for m in members for e in m.errors()]
    # What was committed is the end of every partition.
    client = KioClient(cluster.bootstrap)
    try:
        answer = client.call(ApiKey.OFFSET_FETCH, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                                   "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]}],
                                                      "require_stable": False})
    finally:
        client.close()
    ends = {p: 1 + max(r.offset for r in produced if r.partition == p) for p in range(PARTITIONS)}
    [g] = answer.groups
    assert {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions} == ends


def test_a_member_joins_and_leaves_while_the_others_keep_consuming(cluster, tmp_path):
    group, topic = "cp-churn", "cp-churn-topic"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    producer = Producing(cluster.bootstrap, topic, "churn")
    old = [Member(cluster.bootstrap, group, topic, tmp_path / f"churn-{i}.txt") for i in range(2)]
    try:
        assert wait_until(lambda: formed(old, topic))
        before = [m.assignment() for m in old]
        joined_at = time.time()
        newcomer = Member(cluster.bootstrap, group, topic, tmp_path / "churn-new.txt")
        assert wait_until(lambda: formed(old + [newcomer], topic))
        moved = newcomer.assignment()
        for m, had in zip(old, before):
            lost = set().union(*(parts for kind, parts in m.events(joined_at) if kind == "REVOKED"))
            # Only what the newcomer took was revoked; the rest stayed, never revoked and re-added.
            assert lost <= moved and lost == had - m.assignment(), (lost, moved, had)
            assert m.assignment() and m.assignment() <= had
        # Everyone keeps consuming with three members.
        counts = [len(m.consumed()) for m in old + [newcomer]]
        assert wait_until(lambda: all(len(m.consumed()) > c for m, c in zip(old + [newcomer], counts)))
        left_at = time.time()
        newcomer.stop()
        assert wait_until(lambda: formed(old, topic)), (describe(cluster.bootstrap, group), [m.lines[-5:] for m in old])
        for m in old:
            assert [kind for kind, _ in m.events(left_at)] == ["ADDED"] * len(m.events(left_at)), "revoked on a leave"
        counts = [len(m.consumed()) for m in old]
        assert wait_until(lambda: all(len(m.consumed()) > c for m, c in zip(old, counts)))
    finally:
        producer.stop()
        for m in old:
            m.stop()
    assert not [e for m in old for e in m.errors()]


def test_killing_the_coordinator_changes_no_epoch_and_no_assignment(cluster, tmp_path):
    group, topic = "cp-failover", "cp-failover-topic"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    producer = Producing(cluster.bootstrap, topic, "fo")
    members = [Member(cluster.bootstrap, group, topic, tmp_path / f"fo-{i}.txt") for i in range(2)]
    try:
        assert wait_until(lambda: formed(members, topic))
        # Settled: every member stable at the group's epoch.
        assert wait_until(lambda: len({e for e, _ in describe(cluster.bootstrap, group).values()}) == 1)
        epochs = describe(cluster.bootstrap, group)
        assignments = [m.assignment() for m in members]
        status = admin_call(cluster.bootstrap, "status")
        partition = group_partition(group, 50)
        owner = next(l["actor"] for l in status["leaders"] if l["topic"] == "__consumer_offsets" and l["partition"] == partition)
        killed_at = time.time()
        assert cluster.cli("kill", owner).returncode == 0
        assert cluster.wait_for_event(f"partitions of {owner} moved")
        counts = [len(m.consumed()) for m in members]
        # Keep watching for more than a session timeout after the move: a member that lost its
        # session would be fenced and rejoin at a new epoch with a new assignment.
        watch_until = time.time() + SESSION_MS / 1000 * 1.5
        assert wait_until(lambda: time.time() > watch_until and all(len(m.consumed()) > c for m, c in zip(members, counts)))
        assert describe(cluster.bootstrap, group) == epochs
        assert [m.assignment() for m in members] == assignments
        assert all(m.events(killed_at) == [] for m in members)
    finally:
        producer.stop()
        for m in members:
            m.stop()


def test_a_regex_subscription_picks_up_a_topic_created_later(cluster, tmp_path):
    group = "cp-regex"
    create_topic(cluster.bootstrap, "rx-a", 2)
    create_topic(cluster.bootstrap, "other", 2)
    confluent_produce(cluster.bootstrap, "rx-a", records(20, 2, "a"))
    confluent_produce(cluster.bootstrap, "other", records(20, 2, "o"))
    member = Member(cluster.bootstrap, group, "^rx-.*", tmp_path / "rx.txt")
    try:
        assert wait_until(lambda: len(member.consumed()) == 20)
        create_topic(cluster.bootstrap, "rx-b", 3)
        confluent_produce(cluster.bootstrap, "rx-b", records(30, 3, "b"))
        assert wait_until(lambda: len(member.consumed()) == 50, timeout=120)
        assert {t for t, _, _ in member.consumed()} == {"rx-a", "rx-b"}
        assert member.assignment() == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1), ("rx-b", 2)}
    finally:
        member.stop()


def test_classic_members_then_consumer_members_then_the_classic_ones_leave(cluster, tmp_path):
    group, topic = "cp-migrate", "cp-migrate-topic"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    producer = Producing(cluster.bootstrap, topic, "mig")
    classic = [Member(cluster.bootstrap, group, topic, tmp_path / f"classic-{i}.txt", "classic") for i in range(2)]
    modern: list[Member] = []
    try:
        assert wait_until(lambda: formed(classic, topic))
        assert wait_until(lambda: all(m.consumed() for m in classic))
        modern = [Member(cluster.bootstrap, group, topic, tmp_path / f"modern-{i}.txt") for i in range(2)]
        # The group is a consumer group now, with the classic members in it.
        assert wait_until(lambda: formed(classic + modern, topic))
        assert len(describe(cluster.bootstrap, group)) == 4
        counts = [len(m.consumed()) for m in classic + modern]
        assert wait_until(lambda: all(len(m.consumed()) > c for m, c in zip(classic + modern, counts)))
        for m in classic:
            m.stop()
        assert wait_until(lambda: formed(modern, topic))
        assert set(describe(cluster.bootstrap, group)) and len(describe(cluster.bootstrap, group)) == 2
    finally:
        producer.stop()
    try:
        every = {(topic, r.partition, r.offset) for r in producer.produced}
        assert wait_until(lambda: every <= {row for m in classic + modern for row in m.consumed()})
    finally:
        for m in classic + modern:
            m.stop()
    seen = Counter(row for m in classic + modern for row in m.consumed())
    allowed = set().union(*(m.failed_commits() for m in classic + modern))
    twice = {row for row, n in seen.items() if n > 1}
    assert twice <= allowed, sorted(twice - allowed)[:10]
    assert not [e for m in classic + modern for e in m.errors()]
