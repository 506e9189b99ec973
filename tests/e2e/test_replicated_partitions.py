"""Replicated partitions on three Ray nodes with data directories of their own (issue 25).

Three ray.cluster_utils nodes on this machine, each started with RAYGROUPS_NODE_DATA_DIR set to a
directory of its own, as three machines' local disks; raygroups attached with `--address` and no
`--shared-data-dir`. A topic gets three replicas, one per node; Metadata names them and the ISR;
acks=all writes are in every replica's log; a worker node removed mid-load costs its leaderships,
which go to in-sync replicas on the other nodes, and no acknowledged record is lost. A leader
whose host is paused (SIGSTOP: alive to Ray, answering nothing) is fenced once its session lapses;
its follower leads alone, below min.insync.replicas, and refuses acks=all until the paused host
answers again, catches up and is back in the ISR. A node that joins with an empty disk (as a
lost node back with its disk wiped: a new replica) gets the lost replica's copies by reassignment,
and the partitions have three in-sync replicas again. Then an operator moves a copy to that node
with AlterPartitionReassignments, as kafka-reassign-partitions.sh does, and a fourth node joins
and is given copies until the copies per node are even. The internal topics, made in one copy
in the head's directory at the start, are adopted into replication as the other nodes'
coordinators come up: by the end every partition of both has three in-sync replicas, and a group
commits and reads back its offsets.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from ray.cluster_utils import Cluster

from cluster.admin_client import admin_call
from cluster.gateway.apis import ApiKey
from cluster.log.data_directory import NODE_DATA_DIR_ENV
from coordinator.hashing import group_partition
from tests.clients import confluent_consume_all, confluent_produce, records
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.e2e.test_multinode import head
from tests.e2e.test_multinode import wait_for as _wait_for

pytestmark = pytest.mark.slow
PARTITIONS = 3
IDEMPOTENT = {"enable.idempotence": True}


@pytest.fixture(scope="module")
def disks(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("disks")
    return [root / f"node{i}" for i in range(3)]


@pytest.fixture(scope="module")
def nodes(disks):
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "env_vars": {NODE_DATA_DIR_ENV: str(disks[0])}})
    for disk in disks[1:]:
        cluster.add_node(num_cpus=1, env_vars={NODE_DATA_DIR_ENV: str(disk)})
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="module")
def raygroups(nodes, tmp_path_factory):
    proc = ClusterProcess(tmp_path_factory.mktemp("controller"), "--address", nodes.address, "--gateways", "per-node",
                          "--config", "replica.lag.time.max.ms=4000", "--config", "replica.fetch.wait.max.ms=200",
                          "--config", "replica.fetch.backoff.ms=200", "--config", "broker.session.timeout.ms=3000",
                          "--config", "broker.heartbeat.interval.ms=500",
                          "--config", "raygroups.replica.replace.after.ms=3000").start()
    yield proc
    proc.stop()


def wait_for(check, timeout: float, what: str, proc: ClusterProcess | None = None, topic: str | None = None):
    """test_multinode's wait, and on a timeout what the cluster looked like: the topic as a client
    sees it, the hosts of replicas, and the controller's last events and log lines."""
    try:
        return _wait_for(check, timeout, what)
    except AssertionError as exc:
        if proc is None:
            raise
        lines = [str(exc)]
        try:
            if topic is not None:
                lines.append(f"{topic}: {described(head(proc), topic)}")
            lines += [f"actor {a['name']} {a['kind']} alive={a['alive']} node={a.get('node_id')} "
                      f"replica={a.get('replica_id')} partitions={[(p['topic'], p['partition']) for p in a.get('partitions', [])]}"
                      for a in admin_call(head(proc), "actors")]
        except Exception as failed:  # noqa: BLE001 - the dump is a help, the timeout is the failure
            lines.append(f"(the cluster did not answer: {failed})")
        lines.append("".join(proc.stderr_lines[-80:]))
        raise AssertionError("\n".join(lines)) from None


def replica_nodes(proc: ClusterProcess) -> set[str]:
    """The nodes with a partition leader up that keeps a replica: the data directories new
    topics' replicas are placed in (CreateTopics counts only those)."""
    return {a["node_id"] for a in admin_call(head(proc), "actors")
            if a["kind"] == "partition-leader" and a["alive"] and "replica_id" in a and "error" not in a}


def described(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader broker, replica brokers, in-sync brokers), as a client sees them."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in meta.topics[topic].partitions.items()}


def metadata_brokers(bootstrap: str) -> set[int]:
    """The broker ids Metadata lists: gateways up (one still starting is not listed, and a replica
    on its node is named by an id no gateway has until it is)."""
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def broker_of_node(proc) -> dict[str, int]:
    gateways = [a for a in admin_call(head(proc), "actors") if a["kind"] == "gateway" and a["alive"]]
    return {a["node_id"]: int(a["name"].rsplit("-", 1)[1]) for a in gateways}


def test_three_replicas_a_node_lost_and_nothing_acknowledged_lost(nodes, raygroups, disks):
    # A partition leader with a replica on each node (the status's replicas count any actor kind:
    # a node whose coordinator was up before its partition leader would get no replica).
    wait_for(lambda: len(replica_nodes(raygroups)) == 3, 120, "a partition leader with a replica on each node", raygroups)
    topic = "replicated"
    admin = AdminClient({"bootstrap.servers": head(raygroups)})
    admin.create_topics([NewTopic(topic, PARTITIONS, -1)])[topic].result(30)
    wait_for(lambda: len(described(head(raygroups), topic)) == PARTITIONS
             and all(len(isr) == 3 for _, _, isr in described(head(raygroups), topic).values()), 60, "three in-sync replicas", raygroups, topic)
    view = described(head(raygroups), topic)
    assert all(sorted(replicas) == sorted(isr) and len(set(replicas)) == 3 for _, replicas, isr in view.values())
    # Leaders are spread, one partition a node, and each is led from its leader replica's node.
    assert len({leader for leader, _, _ in view.values()}) == 3

    first = confluent_produce(head(raygroups), topic, records(300, PARTITIONS, "a"), **IDEMPOTENT)
    assert len(first) == 300
    # acks=all: every replica's log on its own disk holds the records (the followers' too).
    for disk in disks:
        for p in range(PARTITIONS):
            segments = list((disk / f"{topic}-{p}").glob("*.log"))
            assert segments and sum(f.stat().st_size for f in segments) > 0, (disk, p)

    # Lose a worker node that leads a partition (never the head: the controller runs there).
    brokers = broker_of_node(raygroups)
    victim = next(n for n in nodes.worker_nodes if brokers.get(n.node_id) in {l for l, _, _ in view.values()})
    gone = brokers[victim.node_id]
    lost_at = time.time()
    nodes.remove_node(victim)
    # Two in-sync copies each (a follower slowed by a loaded machine may leave the ISR for a while
    # and come back: waited for, as a client would).
    wait_for(lambda: (lambda d: len(d) == PARTITIONS and all(l != gone and l >= 0 and gone not in isr and len(isr) == 2
                                                             for l, _, isr in d.values()))(
        described(head(raygroups), topic)), 60, "leaders and ISRs without the lost node", raygroups, topic)
    moved = time.time() - lost_at
    after = described(head(raygroups), topic)
    assert all(len(isr) == 2 and gone in replicas for _, replicas, isr in after.values())  # offline, still assigned

    # Two in-sync replicas still meet min.insync.replicas: acks=all goes on.
    second = confluent_produce(head(raygroups), topic, records(300, PARTITIONS, "b"), **IDEMPOTENT)
    assert len(second) == 300
    acknowledged = {(r.partition, r.offset, r.value) for r in first + second}
    read = confluent_consume_all(head(raygroups), topic, PARTITIONS, len(acknowledged), timeout=90)
    got = {(r.partition, r.offset, r.value) for r in read}
    assert acknowledged <= got, sorted(acknowledged - got)[:5]
    assert len(read) == len(got) == len(acknowledged)  # idempotent: nothing twice
    print(f"\nFIGURES replicated partitions led again {moved:.1f} s after the node's loss")


def test_a_paused_leader_is_fenced_and_acks_all_waits_for_the_isr_to_be_whole_again(nodes, raygroups):
    """After the first test two nodes live: a new topic has two replicas (the default, capped)."""
    topic = "isolated"
    admin = AdminClient({"bootstrap.servers": head(raygroups)})
    admin.create_topics([NewTopic(topic, 1, -1)])[topic].result(30)
    wait_for(lambda: (lambda d: len(d) == 1 and len(d[0][2]) == 2)(described(head(raygroups), topic)), 60,
             "two in-sync replicas", raygroups, topic)
    before = confluent_produce(head(raygroups), topic, records(50, 1, "a"), **IDEMPOTENT)
    assert len(before) == 50
    leader_broker, _, _ = described(head(raygroups), topic)[0]
    node_of_broker = {b: n for n, b in broker_of_node(raygroups).items()}
    host = next(a["name"] for a in admin_call(head(raygroups), "actors")
                if a["kind"] == "partition-leader" and a["alive"] and a["node_id"] == node_of_broker[leader_broker]
                and any(p["topic"] == topic for p in a.get("partitions", [])))
    epoch = next(l["epoch"] for l in admin_call(head(raygroups), "status")["leaders"] if l["topic"] == topic)

    pause = threading.Thread(target=admin_call, args=(head(raygroups), "pause"), kwargs={"name": host, "seconds": 8})
    pause.start()
    try:
        # Fenced after its 3 s session: the other replica leads, alone, below min.insync.replicas.
        wait_for(lambda: (lambda d: d[0][0] != leader_broker and len(d[0][2]) == 1)(described(head(raygroups), topic)),
                 30, "the follower leading alone", raygroups, topic)
        during = confluent_produce(head(raygroups), topic, records(50, 1, "b"), **IDEMPOTENT,
                                   **{"message.timeout.ms": 60_000})
        # Acknowledged only after the paused host answered again (the pause call returns then):
        # until it rejoined the ISR, acks=all was refused, never counted on one copy.
        assert not pause.is_alive()
    finally:
        pause.join(60)
    # The records produced meanwhile were acknowledged only once the resumed replica was back in
    # the ISR: acks=all never counted fewer copies than promised.
    assert len(during) == 50
    wait_for(lambda: len(described(head(raygroups), topic)[0][2]) == 2, 30, "the ISR whole again", raygroups, topic)
    events = [e["kind"] for e in admin_call(head(raygroups), "status")["events"]]
    assert "fenced" in events and "unfenced" in events
    after = next(l["epoch"] for l in admin_call(head(raygroups), "status")["leaders"] if l["topic"] == topic)
    assert after > epoch
    acknowledged = {(r.offset, r.value) for r in before + during}
    read = confluent_consume_all(head(raygroups), topic, 1, len(acknowledged), timeout=60)
    assert {(r.offset, r.value) for r in read} == acknowledged and len(read) == 100


def test_a_node_back_with_an_empty_disk_gets_the_lost_replicas_copies(nodes, raygroups, disks):
    """The first test lost a node for good (its replica is gone longer than the 3 s this cluster
    waits); with no third node the copies could go nowhere. A node joins with an empty data
    directory: a new replica, to which the lost one's partitions are copied."""
    topic = "replicated"
    fresh = disks[0].parent / "node3"
    nodes.add_node(num_cpus=1, env_vars={NODE_DATA_DIR_ENV: str(fresh)})
    # A joining node's actors start, then the copies: minutes on a busy two-core machine.
    wait_for(lambda: (lambda brokers: all(len(isr) == 3 and sorted(replicas) == sorted(isr) and set(replicas) <= brokers
                                          for _, replicas, isr in described(head(raygroups), topic).values()))(
        metadata_brokers(head(raygroups))), 240,
             "three in-sync replicas again, the new node's among them, its gateway up", raygroups, topic)
    for p in range(PARTITIONS):
        copied = sum(f.stat().st_size for f in (fresh / f"{topic}-{p}").glob("*.log"))
        kept = sum(f.stat().st_size for f in (disks[0] / f"{topic}-{p}").glob("*.log"))
        assert copied == kept > 0, (p, copied, kept)
    events = admin_call(head(raygroups), "status")["events"]
    assert any(e["kind"] == "reassign" for e in events)


def test_an_operator_moves_a_replica_to_another_node_with_alter_partition_reassignments(nodes, raygroups, disks):
    """Kafka's AlterPartitionReassignments (what kafka-reassign-partitions.sh sends): the two-copy
    topic of the test before moves one copy to the node that joined; the copy is made over the
    replica fetch, ListPartitionReassignments shows the move until it completes, and every
    record is still read once."""
    topic = "isolated"
    ((_, replicas, isr),) = described(head(raygroups), topic).values()
    assert len(replicas) == 2 and sorted(isr) == sorted(replicas)
    (spare,) = metadata_brokers(head(raygroups)) - set(replicas)
    target = [spare, replicas[1]]
    with KioClient(head(raygroups)) as client:
        body = {"timeout": 30_000, "allow_replication_factor_change": False,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": target}]}]}
        response = client.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, body)
        assert response.error_code == ErrorCode.none
        assert response.responses[0].partitions[0].error_code == ErrorCode.none, response
        # This topic's move (the internal topics' copies may be moving too, as the node joined).
        mine = {"timeout": 5000, "topics": [{"name": topic, "partition_indexes": [0]}]}
        wait_for(lambda: client.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, mine).topics == (),
                 120, "the move to complete", raygroups, topic)
    wait_for(lambda: (lambda d: sorted(d[0][1]) == sorted(target) and sorted(d[0][2]) == sorted(target))(
        described(head(raygroups), topic)), 60, "the new assignment in Metadata, all in sync", raygroups, topic)
    fresh = disks[0].parent / "node3"
    assert sum(f.stat().st_size for f in (fresh / f"{topic}-0").glob("*.log")) > 0
    read = confluent_consume_all(head(raygroups), topic, 1, 100, timeout=60)
    assert len(read) == len({(r.offset, r.value) for r in read}) == 100


def test_a_node_that_joins_gets_copies_of_existing_partitions(nodes, raygroups, disks):
    """Scaling out without a shared disk: a fourth node joins a cluster whose partitions all have
    their replicas; the controller moves copies to it by reassignment (a few at a time) until the
    copies per node are within one of even, and every record is still read once."""
    fresh = disks[0].parent / "node4"
    nodes.add_node(num_cpus=1, env_vars={NODE_DATA_DIR_ENV: str(fresh)})
    topics = {"replicated": PARTITIONS, "isolated": 1}  # 3 × 3 + 1 × 2 copies

    def spread() -> dict[int, int] | None:
        held: dict[int, int] = {b: 0 for b in metadata_brokers(head(raygroups))}
        for topic, count in topics.items():
            seen = described(head(raygroups), topic)
            if len(seen) != count or any(leader < 0 for leader, _, _ in seen.values()):
                # No leader named: hosts fenced for a while (this module's 3 s sessions, on a
                # loaded machine as a node starts), or a move under way. A partition unseen has
                # no copies to count: never "even" (a CI run took four empty nodes for even).
                return None
            for _, replicas, isr in seen.values():
                if sorted(replicas) != sorted(isr) or any(r not in held for r in replicas):
                    return None  # moving, or a replica not yet on a live node's gateway
                for r in replicas:
                    held[r] += 1
        return held if len(held) == 4 and max(held.values()) - min(held.values()) <= 1 else None

    held = wait_for(spread, 240, "copies on the new node, within one of even", raygroups, "replicated")
    assert sorted(held.values()) == [2, 3, 3, 3]  # 11 copies over four nodes
    assert any(f.stat().st_size > 0 for f in fresh.glob("*/*.log"))
    events = [e["message"] for e in admin_call(head(raygroups), "status")["events"] if e["kind"] == "reassign"]
    assert any("even out" in m for m in events)
    read = confluent_consume_all(head(raygroups), "replicated", PARTITIONS, 600, timeout=90)
    assert len(read) == len({(r.partition, r.offset) for r in read}) == 600


def test_the_coordinators_topics_are_replicated_and_a_group_commits_through_them(nodes, raygroups):
    """After every change above (a node lost, a paused host, a wiped node back, an operator's move,
    a node joining), each partition of __consumer_offsets and __share_group_state has three
    in-sync replicas, and offsets committed by a group are read back by the next member."""
    def whole() -> bool:
        for topic in ("__consumer_offsets", "__share_group_state"):
            partitions = described(head(raygroups), topic)
            if not partitions or any(len(r) != 3 or sorted(r) != sorted(i) for _, r, i in partitions.values()):
                return False
        return True

    wait_for(whole, 240, "the internal topics in three in-sync copies", raygroups, "__consumer_offsets")
    first = Consumer({"bootstrap.servers": head(raygroups), "group.id": "replicated-offsets",
                      "enable.auto.commit": False})
    try:
        wanted = [TopicPartition("replicated", p, 100 + p) for p in range(PARTITIONS)]

        def committed() -> bool:
            try:
                return all(tp.error is None for tp in first.commit(offsets=wanted, asynchronous=False))
            except KafkaException:
                return False  # a coordinator still loading or moving: the client is told to retry

        wait_for(committed, 60, "a commit accepted")
    finally:
        first.close()
    second = Consumer({"bootstrap.servers": head(raygroups), "group.id": "replicated-offsets"})
    try:
        committed = second.committed([TopicPartition("replicated", p) for p in range(PARTITIONS)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in committed] == [(p, 100 + p) for p in range(PARTITIONS)]
    finally:
        second.close()


# Errors a member is told while its coordinator moves: it retries, as Kafka's clients do.
MOVING = {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress}


def test_a_group_keeps_its_generation_and_commits_through_the_loss_of_its_coordinators_node(nodes, raygroups):
    """Issue 25's end to end of replicated coordinators: a classic group whose __consumer_offsets
    partition is led on a worker node joins and commits; that node is removed; a replica on
    another node leads the partition (its own copy of the log, replayed), the member's heartbeats
    at the same generation are answered without a rebalance, and the offsets it committed are
    read back. A confluent-kafka consumer of KIP-848's protocol, in a group of the same partition,
    keeps its partitions through the loss (nothing revoked or lost), reads what is produced after
    it and commits through the new leader. The adopted partitions' leaders are spread (each
    adoption ends with its preferred replica leading), so a worker node leads some."""
    partitions = described(head(raygroups), "__consumer_offsets")
    head_broker = broker_of_node(raygroups)[nodes.head_node.node_id]
    group = next(f"survivor-{i}" for i in range(10_000)
                 if partitions[group_partition(f"survivor-{i}", len(partitions))][0] not in (head_broker, -1))
    partition = group_partition(group, len(partitions))
    leader_broker_before = partitions[partition][0]
    (victim,) = [n for n in nodes.worker_nodes if broker_of_node(raygroups).get(n.node_id) == leader_broker_before]
    topic = "replicated"
    with KioClient(head(raygroups)) as client:
        joined = retry_moving(lambda: client.call(ApiKey.JOIN_GROUP, 3, {
            "group_id": group, "session_timeout": timedelta(seconds=60), "rebalance_timeout": timedelta(seconds=60),
            "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}))
        assert joined.error_code == ErrorCode.none, joined
        member, generation = joined.member_id, joined.generation_id
        synced = client.call(ApiKey.SYNC_GROUP, 3, {
            "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
            "assignments": [{"member_id": member, "assignment": b"all"}]})
        assert synced.error_code == ErrorCode.none, synced

        def commit(base: int) -> None:
            answer = retry_moving(lambda: client.call(ApiKey.OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": base + p, "committed_leader_epoch": -1,
                     "committed_metadata": None} for p in range(PARTITIONS)]}]}),
                lambda r: r.topics[0].partitions[0].error_code)
            assert {p.error_code for p in answer.topics[0].partitions} == {ErrorCode.none}, answer

        def fetched() -> list[tuple[int, int]]:
            answer = retry_moving(lambda: client.call(ApiKey.OFFSET_FETCH, 7, {
                "group_id": group, "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}],
                "require_stable": True}))
            assert answer.error_code == ErrorCode.none, answer
            return sorted((p.partition_index, p.committed_offset) for p in answer.topics[0].partitions)

        commit(200)  # acknowledged: in every in-sync copy of the partition
        # A real client of KIP-848's protocol in a group of the same coordinator partition.
        consumer_group = next(f"survivor-848-{i}" for i in range(10_000)
                              if group_partition(f"survivor-848-{i}", len(partitions)) == partition)
        with ConsumerProtocolMember(head(raygroups), consumer_group, topic) as real:
            real.poll_until(lambda: len(real.assigned) == PARTITIONS and real.read, "its partitions and records")
            nodes.remove_node(victim, allow_graceful=False)
            wait_for(lambda: described(head(raygroups), "__consumer_offsets")[partition][0] not in (leader_broker_before, -1),
                     120, "the coordinator partition led on another node", raygroups, "__consumer_offsets")
            beat = retry_moving(lambda: client.call(ApiKey.HEARTBEAT, 3, {
                "group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}))
            assert beat.error_code == ErrorCode.none, beat  # the same generation: no rebalance
            assert fetched() == [(p, 200 + p) for p in range(PARTITIONS)]
            commit(300)  # the new leader takes writes: two in-sync copies left, min.insync.replicas 2
            assert fetched() == [(p, 300 + p) for p in range(PARTITIONS)]

            # The consumer-protocol member kept its partitions (its heartbeats to the new
            # coordinator, at the same member epoch, were answered: nothing revoked or lost), reads
            # what is produced after the loss and commits it through the new leader.
            after = confluent_produce(head(raygroups), topic, records(30, PARTITIONS, "after-loss"), **IDEMPOTENT)
            wanted = {(r.partition, r.offset) for r in after}
            real.poll_until(lambda: wanted <= real.read, "the records produced after the loss")
            ends = real.commit_read()
            assert real.events == [("assign", PARTITIONS)], real.events
        reader = Consumer({"bootstrap.servers": head(raygroups), "group.id": consumer_group})
        try:
            committed = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        finally:
            reader.close()
        assert sorted((tp.partition, tp.offset) for tp in committed) == sorted(ends.items())


class ConsumerProtocolMember:
    """confluent-kafka with group.protocol=consumer: what its group gave it and took away, and the
    (partition, offset) of every record it read."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.events: list[tuple[str, int]] = []
        self.assigned: set[int] = set()
        self.read: set[tuple[int, int]] = set()
        self.topic = topic
        # Not polled while the test waits out the node's removal and the other member's checks
        # (minutes on a loaded machine): the poll interval must not end its membership meanwhile.
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "max.poll.interval.ms": 900_000})
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost)

    def _assign(self, _consumer, partitions) -> None:
        self.events.append(("assign", len(partitions)))
        self.assigned |= {tp.partition for tp in partitions}

    def _revoke(self, _consumer, partitions) -> None:
        if partitions:
            self.events.append(("revoke", len(partitions)))
            self.assigned -= {tp.partition for tp in partitions}

    def _lost(self, _consumer, partitions) -> None:
        self.events.append(("lost", len(partitions)))
        self.assigned -= {tp.partition for tp in partitions}

    def poll_until(self, done, what: str, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while not done():
            assert time.time() < deadline, f"{what} not within {timeout:.0f} s: {self.events}"
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                self.read.add((message.partition(), message.offset()))

    def commit_read(self) -> dict[int, int]:
        """Commit the position after the last record read of each partition; retried while the
        coordinator is still moving, as an application would."""
        ends = {p: max(o for q, o in self.read if q == p) + 1 for p in {p for p, _ in self.read}}
        offsets = [TopicPartition(self.topic, p, o) for p, o in ends.items()]
        deadline = time.time() + 60
        while True:
            try:
                answered = self.consumer.commit(offsets=offsets, asynchronous=False)
                assert all(tp.error is None for tp in answered), answered
                return ends
            except KafkaException:
                assert time.time() < deadline, "no commit accepted within 60 s"
                self.consumer.poll(0.25)

    def __enter__(self) -> "ConsumerProtocolMember":
        return self

    def __exit__(self, *_exc) -> None:
        self.consumer.close()


def retry_moving(send, error_of=lambda r: r.error_code, timeout: float = 60):
    """Send until the answer is not one of a coordinator moving (test_multinode's wait)."""
    deadline = time.time() + timeout
    while True:
        answer = send()
        if error_of(answer) not in MOVING or time.time() > deadline:
            return answer
        time.sleep(0.25)
