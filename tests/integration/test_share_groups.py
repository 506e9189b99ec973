"""Share groups (KIP-932) of real clients: confluent_kafka.ShareConsumer processes against a cluster.

More consumers than partitions share a 2-partition topic; every produced record must end accepted
or rejected (archived), released records must come back with a higher delivery count, and no
record may be held by two consumers at once (two deliveries with the same delivery count). The
partition leaders' share partitions must agree: their start offset reaches the log end.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from loadtest.drivers.crowd import Crowd
from loadtest.members.machine import parse_bootstrap
from loadtest.members.share import ShareConfig, ShareMember
from tests.clients import confluent_produce, create_topic
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.share_runs import Deliveries, ShareConsumerProc, share_partitions, wait_until

LOCK_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(
        tmp_path_factory.mktemp("share"),
        "--config", "share.auto.offset.reset=earliest",
        "--config", "group.share.heartbeat.interval.ms=500",
        "--config", "group.share.session.timeout.ms=10000",
        "--config", f"group.share.record.lock.duration.ms={LOCK_MS}",
        "--config", "group.share.min.record.lock.duration.ms=1000",
        gateways=2,
    ).start()
    yield proc
    proc.stop()


def produce(bootstrap: str, topic: str, n: int) -> set[tuple[int, int]]:
    acked = confluent_produce(bootstrap, topic, [(i % 2, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(n)])
    return {(r.partition, r.offset) for r in acked}


def run_group(
    cluster, group: str, topic: str, consumers: int, *args: str, produce_after_join: int = 0
) -> list[ShareConsumerProc]:
    """Run consumers of one group to the end; optionally produce once they all hold assignments,
    in small batches, so that the records are spread over every consumer."""
    procs = [ShareConsumerProc.start(f"c{i}", cluster.bootstrap, group, topic, *args) for i in range(consumers)]
    try:
        if produce_after_join:
            wait_until(
                lambda: len([m for m in describe(cluster, group).members if m.assignment.topic_partitions]) == consumers,
                timeout=60,
                what=f"{consumers} members with assignments",
            )
            for start in range(0, produce_after_join, 20):
                confluent_produce(
                    cluster.bootstrap,
                    topic,
                    [(i % 2, f"k{i}".encode(), f"v{i}".encode(), []) for i in range(start, min(start + 20, produce_after_join))],
                )
                time.sleep(0.05)
        for p in procs:
            assert p.wait() == 0, p.lines[-5:]
    finally:
        for p in procs:
            p.kill()
    return procs


def share_offsets(cluster, group: str, topic: str | None = None) -> dict[tuple[str, int], tuple[int, int]]:
    """DescribeShareGroupOffsets v1: (topic, partition) -> (start offset, lag), as stored durably."""
    client = KioClient(cluster.bootstrap)
    topics = None if topic is None else [{"topic_name": topic, "partitions": [0, 1]}]
    response = client.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": group, "topics": topics}]})
    (g,) = response.groups
    assert g.error_code == ErrorCode.none, g
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in g.topics for p in t.partitions}


def assert_all_done(cluster, group: str, topic: str, produced: set[tuple[int, int]]) -> None:
    """The share coordinator's durable state: every record done, the start offset at the log end."""
    ends = {(topic, p): (max(o for q, o in produced if q == p) + 1, 0) for p in (0, 1)}
    assert share_offsets(cluster, group) == ends


def test_implicit_mode_consumers_outnumbering_partitions_consume_everything_once(cluster):
    topic, group = "share-implicit", "sg-implicit"
    create_topic(cluster.bootstrap, topic, 2)
    procs = run_group(cluster, group, topic, 3, "--mode", "implicit", "--idle", "6", produce_after_join=600)
    produced = {(i % 2, i // 2) for i in range(600)}
    seen = Deliveries(procs)
    assert set(seen.by_record) == produced
    assert seen.held_twice() == []
    # Failure-free: nobody released anything, so each record was delivered exactly once.
    assert all(len(ds) == 1 and ds[0]["dc"] == 1 for ds in seen.by_record.values())
    assert set(seen.acked_ok) == produced
    # 3 consumers on 2 partitions, each partition shared by two: the records were spread out
    # (which of two waiting consumers wins a batch is a race, so not necessarily over all three).
    assert sum(1 for p in procs if p.delivered()) >= 2
    assert_all_done(cluster, group, topic, produced)


def test_explicit_mode_accept_release_reject_mix(cluster):
    topic, group = "share-explicit", "sg-explicit"
    create_topic(cluster.bootstrap, topic, 2)
    produced = produce(cluster.bootstrap, topic, 400)
    procs = run_group(cluster, group, topic, 3, "--mode", "explicit", "--policy", "mix", "--idle", "6")
    seen = Deliveries(procs)
    assert set(seen.by_record) == produced
    assert seen.held_twice() == []
    for key, ds in seen.by_record.items():
        counts = sorted(d["dc"] for d in ds)
        assert counts == list(range(1, len(ds) + 1)), (key, counts)  # 1, 2, ...: each delivery one more
        if key[1] % 5 == 0:
            assert counts[-1] >= 2, key  # released on the first delivery: it came back
        assert seen.final_decision(key) in ("accept", "reject")
        assert seen.acked_ok[key], key  # the final decision reached the broker
    assert_all_done(cluster, group, topic, produced)


def test_a_killed_consumers_records_go_to_the_others(cluster):
    topic, group = "share-kill", "sg-kill"
    create_topic(cluster.bootstrap, topic, 2)
    produced = produce(cluster.bootstrap, topic, 200)
    holder = ShareConsumerProc.start("holder", cluster.bootstrap, group, topic, "--policy", "hold")
    try:
        holder.wait_for("holding")
        held = {(d["p"], d["o"]) for d in holder.delivered()}
        assert held
        holder.signal(signal.SIGKILL)
        holder.wait(30)
        procs = run_group(cluster, group, topic, 2, "--mode", "explicit", "--idle", "6")
    finally:
        holder.kill()
    seen = Deliveries([holder, *procs])
    assert set(seen.by_record) == produced
    assert seen.held_twice(closed=("holder",)) == []
    for key in held:
        # Its connection dropped, so its session closed and its records gave their delivery back
        # (KAFKA-17541): the next consumer gets them with delivery count 1 again.
        others = [d for d in seen.by_record[key] if d["who"] != "holder"]
        assert others and min(d["dc"] for d in others) == 1, (key, seen.by_record[key])
    assert_all_done(cluster, group, topic, produced)


def test_a_stopped_consumers_locks_expire_and_its_records_are_redelivered(cluster):
    """SIGSTOP keeps the connection open, so only the acquisition lock can free the records."""
    topic, group = "share-stop", "sg-stop"
    create_topic(cluster.bootstrap, topic, 1)
    confluent_produce(cluster.bootstrap, topic, [(0, b"k", b"v", [])] * 50)
    holder = ShareConsumerProc.start("holder", cluster.bootstrap, group, topic, "--policy", "hold")
    other = None
    try:
        holder.wait_for("holding")
        held = {d["o"] for d in holder.delivered()}
        status = cluster.cli("status")  # the operator sees the records in flight
        assert status.returncode == 0 and "share partitions in flight" in status.stdout and "sg-stop" in status.stdout
        holder.signal(signal.SIGSTOP)
        other = ShareConsumerProc.start("other", cluster.bootstrap, group, topic, "--mode", "explicit", "--idle", "8")
        assert other.wait() == 0
        redelivered = {d["o"]: d for d in other.delivered() if d["o"] in held}
        assert set(redelivered) == held
        assert all(d["dc"] == 2 for d in redelivered.values())
        # Not before the lock expired: the holder was alive, its connection open. The lock runs
        # from the acquisition, which the holder's own reading of the records follows by a
        # response's latency (2 s allowed); not from when the holder was stopped, which the status call
        # before it can put seconds later on a busy machine (it failed so, redelivered 3.7 s after it).
        held_at = min(d["at"] for d in holder.delivered() if d["o"] in held)
        assert min(d["at"] for d in redelivered.values()) >= held_at + LOCK_MS / 1000 - 2
        described = describe(cluster, group)
        assert described.error_code == ErrorCode.none and described.group_state in ("Stable", "Empty")
    finally:
        holder.kill()
        if other is not None:
            other.kill()


def describe(cluster, group: str):
    client = KioClient(cluster.bootstrap)
    response = client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
    return response.groups[0]


def test_list_describe_and_delete_a_share_group_then_start_again(cluster):
    topic, group = "share-admin", "sg-admin"
    create_topic(cluster.bootstrap, topic, 2)
    produced = produce(cluster.bootstrap, topic, 100)
    run_group(cluster, group, topic, 1, "--idle", "4")
    # No session of the group is left: the leaders forget its share partitions (onGroupEmpty).
    wait_until(lambda: not share_partitions(cluster.bootstrap, group, topic), what="share partitions evicted")
    client = KioClient(cluster.bootstrap)
    listed = client.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
    entry = {g.group_id: g for g in listed.groups}[group]
    assert (entry.group_type, entry.protocol_type, entry.group_state) == ("share", "share", "Empty")
    d = describe(cluster, group)
    assert (d.group_state, d.assignor_name, d.members) == ("Empty", "simple", ())
    deleted = client.call(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    assert deleted.results[0].error_code == ErrorCode.none
    # The share state went with the group: a new group of that name starts over (earliest).
    procs = run_group(cluster, group, topic, 1, "--idle", "4")
    again = Deliveries(procs)
    assert set(again.by_record) == produced
    # A classic consumer cannot join a share group's id.
    joined = client.call(
        ApiKey.JOIN_GROUP,
        9,
        {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
         "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]},
    )
    assert joined.error_code in (ErrorCode.inconsistent_group_protocol, ErrorCode.group_id_not_found)


def test_light_load_client_share_members(cluster):
    """The load client's sans-I/O share members (loadtest/members/share.py) on the asyncio driver:
    twenty in one process, acknowledging by a seeded ACCEPT/RELEASE/REJECT mix, half piggybacked
    on fetches, half sent with ShareAcknowledge."""
    topic, group = "share-light", "sg-light"
    create_topic(cluster.bootstrap, topic, 2)
    produced = produce(cluster.bootstrap, topic, 400)

    async def main() -> Crowd:
        crowd = Crowd()
        crowd.start(
            ShareMember(f"light-{i}", parse_bootstrap(cluster.bootstrap), ShareConfig(
                group, [topic], accept=0.7, release=0.2, reject=0.1, seed=i, max_wait_ms=200, piggyback=i % 2 == 0))
            for i in range(20)
        )

        def done() -> bool:
            offsets = share_offsets(cluster, group)
            return len(offsets) == 2 and all(lag == 0 and start >= 200 for start, lag in offsets.values())

        deadline = time.time() + 90
        while time.time() < deadline and not await asyncio.get_running_loop().run_in_executor(None, _quietly, done):
            await asyncio.sleep(0.5)
        await crowd.stop()
        return crowd

    crowd = asyncio.run(main())
    deliveries: dict[tuple[int, int], list[int]] = {}
    for row in crowd.where("delivery"):
        deliveries.setdefault((row["partition"], row["offset"]), []).append(row["delivery_count"])
    assert set(deliveries) == produced
    assert all(len(set(c)) == len(c) for c in deliveries.values())  # never held by two at once
    acks = Counter(row["ack_type"] for row in crowd.where("ack", error="NONE"))
    assert acks["RELEASE"] > 0 and acks["REJECT"] > 0
    assert crowd.where("response", api="ShareAcknowledge", error="NONE")  # the non-piggybacking half
    assert any(max(c) >= 2 for c in deliveries.values())  # released records came back
    assert share_offsets(cluster, group) == {(topic, 0): (200, 0), (topic, 1): (200, 0)}


def _quietly(check):
    try:
        return check()
    except AssertionError:
        return False
