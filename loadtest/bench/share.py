"""Share-group measurements used by `python -m loadtest.bench` (issue: share groups, KIP-932).

Each figure comes with a baseline measured in the same run:
- consume rate: records/s acquired and acknowledged by a confluent ShareConsumer, against a
  classic confluent Consumer group reading the same topic;
- acknowledgement latency: ShareAcknowledge round trips of light share members (the write to
  the share coordinator included), against OffsetCommit round trips of light classic members;
- share-state writes/s one share coordinator actor sustains, against offset commits/s one group
  coordinator actor sustains, both driven over Ray exactly as the cluster's own callers do;
- memory per in-flight record in a SharePartition, with batch-level state and once split per offset;
- SimpleAssignor time against the classic range assignor for the same members and partitions.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import tracemalloc
import uuid
from typing import Any

from kio.schema.errors import ErrorCode


# -- end-to-end consume rate ----------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int = 100, batch_records: int = 10_000) -> None:
    """Fill a new topic; a share fetch acquires whole log batches, so `batch_records` sets its grain."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": batch_records})
    value = b"v" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def classic_consume_rate(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-classic", "auto.offset.reset": "earliest",
                         "group.protocol": "classic", "enable.auto.commit": True})
    consumer.subscribe([topic])
    got, first = 0, None
    deadline = time.perf_counter() + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if not msg.error():
                first = first or time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got / elapsed if elapsed > 0 else 0.0


def share_consume_rate(bootstrap: str, topic: str, records: int, max_poll_records: int | None = None) -> float:
    """Records/s acquired and acknowledged (implicit mode: each poll accepts the previous one).

    `max_poll_records` (librdkafka's max.poll.records, the ShareFetch's MaxRecords; 500 when not
    given) shows how far the rate is bound by round trips rather than by work per record."""
    from confluent_kafka import ShareConsumer

    config = {"bootstrap.servers": bootstrap, "group.id": "bench-share"}
    if max_poll_records is not None:  # a group of its own: it reads the whole topic again
        config.update({"group.id": f"bench-share-{max_poll_records}", "max.poll.records": max_poll_records})
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    got, first = 0, None
    deadline = time.perf_counter() + 300
    while got < records and time.perf_counter() < deadline:
        for msg in consumer.poll(0.5) or []:
            if not msg.error():
                first = first or time.perf_counter()
                got += 1
    consumer.commit_sync()  # the last poll's records acknowledged too
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return got / elapsed if elapsed > 0 else 0.0


# -- acknowledgement latency -----------------------------------------------------------------------------


def _percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"p50": float("nan"), "p99": float("nan"), "n": 0}
    q = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": q[49], "p99": q[98], "n": len(samples)}


async def share_ack_latency(bootstrap: str, topic: str, members: int, seconds: float) -> dict[str, float]:
    """ShareAcknowledge round trips of light share members acknowledging each fetched batch alone."""
    from loadtest.drivers.crowd import Crowd
    from loadtest.members.machine import parse_bootstrap
    from loadtest.members.share import ShareConfig, ShareMember

    crowd = Crowd()
    crowd.start(ShareMember(f"ack-{i}", parse_bootstrap(bootstrap), ShareConfig(
        "bench-ack", [topic], max_records=50, max_wait_ms=100, piggyback=False, seed=i)) for i in range(members))
    await asyncio.sleep(seconds)
    await crowd.stop()
    return _percentiles([r["latency_ms"] for r in crowd.where("response", api="ShareAcknowledge", error="NONE")])


async def commit_latency(bootstrap: str, topic: str, members: int, seconds: float) -> dict[str, float]:
    """OffsetCommit round trips of light classic members committing back to back."""
    from loadtest.drivers.crowd import Crowd
    from loadtest.members.classic import ClassicConfig, ClassicMember, ClassicState
    from loadtest.members.machine import parse_bootstrap

    crowd = Crowd()
    crowd.start(ClassicMember(f"commit-{i}", parse_bootstrap(bootstrap), ClassicConfig(
        f"bench-commit-{i}", [topic], fetch=False, commit_interval_ms=1, commit_back_to_back=True)) for i in range(members))
    await crowd.until(lambda: all(m.state is ClassicState.STABLE for m in crowd.members), 60)
    started = time.time() * 1000
    await asyncio.sleep(seconds)
    await crowd.stop()
    return _percentiles([r["latency_ms"] for r in crowd.where("response", started, api="OffsetCommit", error="NONE")])


# -- coordinator write rates over Ray ------------------------------------------------------------------------


async def coordinator_write_rates(controller: Any, seconds: float, writers: int) -> dict[str, float]:
    """Closed loops of `writers` callers, each waiting for its write before the next (as a share
    partition's writes go), batched per actor per loop tick like every cluster caller."""
    from coordinator.classic.messages import CommitPartition, OffsetCommitRequest
    from coordinator.hashing import group_partition
    from sharestate import messages as m
    from sharestate.records import StateBatch

    from cluster.calls import CoordinatorCall, CoordinatorOp, Failed
    from cluster.clients.coordinator import CoordinatorClient
    from cluster.clients.controller import ControllerClient
    from cluster.clients.persister import Persister
    from cluster.clients.routing import Router

    router = Router(controller, await ControllerClient(controller).leadership())
    persister = Persister(router, 50)
    coordinators = CoordinatorClient(router, 50)
    topic_id = uuid.uuid4()
    groups = [f"bench-state-{i}" for i in range(writers)]
    answers = await asyncio.gather(
        *(persister.initialize(m.InitializeShareGroupStateRequest(g, topic_id, 0, state_epoch=0)) for g in groups)
    )
    assert all(a.error_code == ErrorCode.none for a in answers), answers[:3]

    async def closed_loop(one) -> float:
        done = 0
        deadline = time.perf_counter() + seconds

        async def loop(i: int) -> None:
            nonlocal done
            n = 0
            while time.perf_counter() < deadline:
                await one(i, n)
                n += 1
                done += 1

        start = time.perf_counter()
        await asyncio.gather(*(loop(i) for i in range(writers)))
        return done / (time.perf_counter() - start)

    async def share_write(i: int, n: int) -> None:
        response = await persister.write(
            m.WriteShareGroupStateRequest(
                groups[i], topic_id, 0, state_epoch=0, leader_epoch=0, start_offset=n * 10,
                delivery_complete_count=0, state_batches=(StateBatch(n * 10 + 10, n * 10 + 19, 2, 1),),
            )
        )
        assert response.error_code == ErrorCode.none, response

    async def offset_commit(i: int, n: int) -> None:
        p = group_partition(groups[i], 50)
        request = OffsetCommitRequest(
            group_id=groups[i], generation_id=-1, member_id="", group_instance_id=None,
            topics=(("bench-topic", (CommitPartition(0, n, -1, ""),)),), retention_time_ms=-1, api_version=9,
        )
        # Through the gateway's client, so that a commit answered Deferred (still waiting for its
        # replicas past its call) counts only once its outcome is collected.
        outcome = await coordinators.call(CoordinatorCall(CoordinatorOp.COMMIT, p, request))
        assert not isinstance(outcome, Failed), outcome

    return {"commit_wps": await closed_loop(offset_commit), "share_wps": await closed_loop(share_write)}


# -- memory per in-flight record ------------------------------------------------------------------------


def memory_per_inflight_record(records: int, batch: int) -> dict[str, float]:
    from kernel.clock import ManualClock
    from kernel.timer import ManualTimer
    from sharestate.inflight import AcknowledgeType
    from sharestate.partition import AcknowledgementBatch, SharePartition, SharePartitionConfig

    clock = ManualClock()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    timer = ManualTimer(clock)  # the locks are held as a host holds them: armed
    sp = SharePartition("g", uuid.uuid4(), 0, clock=clock, config=SharePartitionConfig(max_inflight_records=records))
    sp.initialize(-1, 0, (), 0)
    for first in range(0, records, batch):
        sp.acquire("member", batch, first, [(first, first + batch - 1)])
        timer.apply(sp.take_timers(), sp)
    batch_level = tracemalloc.get_traced_memory()[0] - base
    # Acknowledging one record inside each batch splits the batch into per-offset states.
    for first in range(0, records, batch):
        outcome = sp.acknowledge("member", [AcknowledgementBatch(first + 1, first + 1, (int(AcknowledgeType.ACCEPT),))])
        sp.complete(outcome.write.transition, committed=True)
    per_offset = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert sp.in_flight_records() == records
    return {"batch_level": batch_level / records, "per_offset": per_offset / records}


# -- assignor ------------------------------------------------------------------------------------------------


def assignor_times(members: int, partitions: int, rounds: int = 5) -> dict[str, float]:
    from coordinator.share.assignor import simple_assign
    from loadtest.members.assignors import range_assign

    topic_id = uuid.uuid4()
    subs = {f"m{i:05}": frozenset({topic_id}) for i in range(members)}
    parts = {topic_id: frozenset(range(partitions))}
    classic_subs = {f"m{i:05}": ["t"] for i in range(members)}

    def best(fn) -> float:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        return min(times)

    return {
        "range_ms": best(lambda: range_assign(classic_subs, {"t": partitions})),
        "simple_ms": best(lambda: simple_assign(subs, parts, {})),
    }
