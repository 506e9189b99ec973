"""`raygroups demo`: an embedded cluster, real Kafka clients, and three actors killed mid-load.

1. A confluent-kafka producer writes with acks=all while the actor leading one of the topic's
   partitions is killed: the controller fails the partition over and the producer's own retries
   carry on.
2. A three-member classic consumer group reads everything back while the group coordinator actor
   that leads the group's `__consumer_offsets` partition is killed: the new leader replays the
   group from the log and the members keep their generation (no rebalance).
3. A three-member KIP-932 share group (confluent-kafka ShareConsumers, explicit acknowledgement)
   reads the topic again as a queue: each consumer releases the records at offsets divisible by
   10 on their first delivery and accepts everything else, while the share coordinator actor
   holding the group's durable share state for partition 0 (its `__share_group_state` partition)
   is killed: the in-flight state lives on the partition leaders, the new coordinator replays
   the durable state from the log, and consumption carries on.
The verdict: every acknowledged record consumed exactly once, committed offsets at the end of
every partition, no member rebalanced by the coordinator failover; in the share group, every
record accepted, every released record delivered again (delivery count 2), no record held by two
consumers at once (delivered twice with the same delivery count), and the durable share state
(DescribeShareGroupOffsets) at the end of every partition with no lag. The run directory keeps
the event log (JSON lines) and a summary.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from coordinator.hashing import group_partition

TOPIC = "demo-orders"
GROUP = "demo-readers"
PARTITIONS = 6
MEMBERS = 3
SHARE_GROUP = "demo-workers"
SHARE_MEMBERS = 3
SHARE_DEADLINE_S = 60.0
SHARE_WORK_S = 0.005  # "processing" per record, so the share group consumes steadily and the kill lands mid-stream


class EventLog:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, kind: str, **fields: Any) -> None:
        self.events.append({"time": time.time(), "kind": kind, **fields})

    def write(self, path: Path) -> None:
        path.write_text("".join(json.dumps(e) + "\n" for e in self.events))


def run_demo(records: int = 2000, out: Path | None = None, console: Console | None = None) -> bool:
    from cluster.config import Config
    from cluster.launcher import start_cluster
    from sharestate.offset_reset import OffsetReset

    console = console or Console()
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="raygroups-demo-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    event = EventLog()
    config = Config(
        {
            "raygroups.partition.leaders": 3,
            "group.initial.rebalance.delay.ms": 500,
            # The share group reads the records phase 1 wrote, so it starts at the beginning.
            "share.auto.offset.reset": OffsetReset.parse("earliest"),
            "group.share.heartbeat.interval.ms": 500,
            "group.share.record.lock.duration.ms": 10_000,
        }
    )
    with console.status("starting an embedded raygroups cluster (Ray + actors)…"):
        cluster = start_cluster(config, run_dir / "data", port=0)
    event("cluster-ready", bootstrap=cluster.bootstrap)
    console.print(f"cluster ready at [bold]{cluster.bootstrap}[/] (data in {run_dir / 'data'})")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            acked, produce_summary = _produce_with_leader_kill(cluster, records, progress, event)
            consume_summary = _consume_as_group_with_coordinator_kill(cluster, acked, progress, event)
            share_summary = _consume_as_share_group_with_state_kill(cluster, config, acked, progress, event)
        import ray

        for e in ray.get(cluster.controller.status.remote())["events"]:
            event("controller-" + e["kind"], message=e["message"], at=e["time"])
        summary = {**produce_summary, **consume_summary, **share_summary}
        ok = (
            summary["delivery errors"] == 0
            and summary["acknowledged"] == records
            and summary["missing"] == 0
            and summary["duplicates"] == 0
            and summary["rebalances after coordinator kill"] == 0
            and summary["committed = end offsets"] is True
            and summary["share: records not accepted"] == 0
            and summary["share: released"] > 0
            and summary["share: released, then redelivered (count 2)"] == summary["share: released"]
            and summary["share: held by two at once"] == 0
            and summary["share: durable state = end offsets, lag 0"] is True
        )
        summary["verdict"] = "PASS" if ok else "FAIL"
        _print_summary(console, summary, ok)
        event.write(run_dir / "events.jsonl")
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        console.print(f"run directory: [bold]{run_dir}[/] (events.jsonl, summary.json, data/)")
        return ok
    finally:
        with console.status("stopping the cluster…"):
            cluster.stop()


def _produce_with_leader_kill(cluster: Any, records: int, progress: Progress, event: EventLog):
    import ray
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
        future.result(30)
    status = ray.get(cluster.controller.status.remote())
    victim = next(lead["actor"] for lead in status["leaders"] if lead["topic"] == TOPIC and lead["partition"] == 0)
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
            event("delivery-error", error=str(err))
        else:
            acked[msg.key()] = (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    task = progress.add_task("producing (acks=all)", total=records)
    kill_at = records * 2 // 5
    for i in range(records):
        producer.produce(TOPIC, key=f"order-{i:06d}".encode(), value=json.dumps({"order": i}).encode(), on_delivery=on_delivery)
        producer.poll(0)
        if i == kill_at:
            producer.flush(30)
            ray.get(cluster.controller.kill.remote(victim))
            event("kill", actor=victim, after_records=i)
            progress.console.print(f"[bold red]killed[/] {victim} (leader of {TOPIC}-0) after {i} records")
        if i % 50 == 0:
            progress.update(task, completed=len(acked))
            time.sleep(0.01)  # a steady load, so the kill lands mid-stream
    while producer.flush(1) > 0:
        progress.update(task, completed=len(acked))
    progress.update(task, completed=len(acked))
    del producer, admin  # librdkafka handles must not outlive the cluster they talk to
    new_leader = next(
        lead for lead in ray.get(cluster.controller.status.remote())["leaders"] if lead["topic"] == TOPIC and lead["partition"] == 0
    )
    return acked, {
        "records": records,
        "acknowledged": len(acked),
        "delivery errors": len(errors),
        "partition leader killed": victim,
        "new leader (epoch)": f"{new_leader['actor']} ({new_leader['epoch']})",
    }


def _consume_as_group_with_coordinator_kill(cluster: Any, acked: dict, progress: Progress, event: EventLog) -> dict:
    import ray
    from confluent_kafka import Consumer, TopicPartition

    seen: Counter[bytes] = Counter()
    rebalances: Counter[int] = Counter()
    lock = threading.Lock()
    stop = threading.Event()
    consumers: list[Consumer] = []

    def member(i: int) -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "group.protocol": "classic",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumers.append(consumer)

        def on_assign(c, partitions) -> None:
            with lock:
                rebalances[i] += 1
            event("assigned", member=i, partitions=[p.partition for p in partitions])

        consumer.subscribe([TOPIC], on_assign=on_assign)
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            with lock:
                seen[msg.key()] += 1
            consumer.commit(message=msg, asynchronous=True)
        # Async commits may have failed while the coordinator moved: store final positions for sure.
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        try:
            if positions:
                consumer.commit(offsets=positions, asynchronous=False)
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    task = progress.add_task(f"consuming as a group of {MEMBERS}", total=len(acked))
    partition = group_partition(GROUP, 50)
    status = ray.get(cluster.controller.status.remote())
    coordinator = next(l["actor"] for l in status["leaders"] if l["topic"] == "__consumer_offsets" and l["partition"] == partition)
    killed_at: float | None = None
    rebalances_at_kill: Counter[int] = Counter()
    deadline = time.time() + 90
    while sum(seen.values()) < len(acked) and time.time() < deadline:
        time.sleep(0.1)
        progress.update(task, completed=sum(seen.values()))
        if killed_at is None and sum(seen.values()) >= len(acked) // 3:
            with lock:
                rebalances_at_kill = Counter(rebalances)
            ray.get(cluster.controller.kill.remote(coordinator))
            event("kill", actor=coordinator, coordinator_of=GROUP)
            progress.console.print(f"[bold red]killed[/] {coordinator} (coordinator of group {GROUP})")
            killed_at = time.time()
    # Keep the members heartbeating a while on the new coordinator before judging "no rebalance".
    time.sleep(max(2.0, (killed_at or 0) + 8 - time.time()))
    progress.update(task, completed=sum(seen.values()))
    with lock:
        rebalanced = sum(rebalances.values()) - sum(rebalances_at_kill.values())
    stop.set()
    for t in threads:
        t.join(60)
    checker = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
    committed = checker.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    ends = [checker.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1] for p in range(PARTITIONS)]
    checker.close()
    del consumers
    return {
        "consumed": sum(seen.values()),
        "missing": sum(1 for k in acked if seen[k] == 0),
        "duplicates": sum(1 for n in seen.values() if n > 1),
        "group coordinator killed": coordinator,
        "rebalances after coordinator kill": rebalanced,
        "committed = end offsets": [tp.offset for tp in committed] == ends
        or f"committed {[tp.offset for tp in committed]} vs end offsets {ends}",
    }


def _consume_as_share_group_with_state_kill(
    cluster: Any, config: Any, acked: dict, progress: Progress, event: EventLog
) -> dict:
    import ray
    from confluent_kafka import AcknowledgeType, Consumer, KafkaException, ShareConsumer, TopicPartition

    from coordinator.hashing import share_state_partition

    checker = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": SHARE_GROUP + "-checker"})
    ends = [checker.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1] for p in range(PARTITIONS)]
    checker.close()
    records = {(p, o) for p in range(PARTITIONS) for o in range(ends[p])}

    delivered: defaultdict[tuple[int, int], list[int]] = defaultdict(list)  # delivery counts seen, per record
    accepted: Counter[tuple[int, int]] = Counter()  # acceptances the broker confirmed
    released: set[tuple[int, int]] = set()  # releases the broker confirmed
    ack_errors: list[str] = []
    batch_sizes: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(i: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": SHARE_GROUP,
                                  "share.acknowledgement.mode": "explicit", "max.poll.records": 100})
        # What this consumer decided, per record, oldest first: the callback names offsets only.
        decisions: defaultdict[tuple[int, int], deque[str]] = defaultdict(deque)

        def on_acknowledged(offsets, error) -> None:
            with lock:
                for tp, acked_offsets in offsets.items():
                    for offset in acked_offsets:
                        key = (tp.partition, offset)
                        pending = decisions.get(key)
                        decision = pending.popleft() if pending else None
                        if pending is not None and not pending:
                            del decisions[key]
                        if error is not None:
                            ack_errors.append(str(error))
                        elif decision == "accept":
                            accepted[key] += 1
                        elif decision == "release":
                            released.add(key)
            if error is not None:
                event("share-ack-error", member=i, error=str(error),
                      records=sum(len(o) for o in offsets.values()))

        consumer.set_acknowledgement_commit_callback(on_acknowledged)
        consumer.subscribe([TOPIC])
        event("share-member-started", member=i)
        try:
            while not stop.is_set():
                try:
                    batch = consumer.poll(0.5)
                except KafkaException as exc:  # the client retries on its own: keep polling
                    event("share-poll-error", member=i, error=str(exc))
                    time.sleep(0.2)
                    continue
                if len(batch):
                    batch_sizes.append(len(batch))
                for msg in batch:
                    if msg.error():
                        event("share-poll-error", member=i, error=str(msg.error()))
                        continue
                    key = (msg.partition(), msg.offset())
                    release = msg.offset() % 10 == 0 and msg.delivery_count() == 1
                    with lock:
                        delivered[key].append(msg.delivery_count())
                        decisions[key].append("release" if release else "accept")
                    time.sleep(SHARE_WORK_S)
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE if release else AcknowledgeType.ACCEPT)
            consumer.commit_sync()  # the last poll's acknowledgements
        except Exception as exc:  # noqa: BLE001 - reported in the event log; the verdict shows the damage
            event("share-member-error", member=i, error=repr(exc))
        finally:
            try:
                consumer.close()
            except Exception as exc:  # noqa: BLE001
                event("share-member-error", member=i, error=repr(exc))
            event("share-member-closed", member=i)

    def done() -> int:
        with lock:
            return sum(1 for key in records if accepted[key])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(SHARE_MEMBERS)]
    for t in threads:
        t.start()
    task = progress.add_task("share group: records done", total=len(records))
    status = ray.get(cluster.controller.status.remote())
    topic_id = uuid.UUID(next(t["topic_id"] for t in status["topics"] if t["name"] == TOPIC))
    state_partition = share_state_partition(
        SHARE_GROUP, topic_id, 0, config["share.coordinator.state.topic.num.partitions"]
    )
    coordinator = next(
        l["actor"] for l in status["leaders"] if l["topic"] == "__share_group_state" and l["partition"] == state_partition
    )
    killed = False
    started = time.time()
    deadline = started + SHARE_DEADLINE_S
    while done() < len(records) and time.time() < deadline:
        time.sleep(0.1)
        progress.update(task, completed=done())
        if not killed and len(delivered) >= len(records) // 3:
            with lock:
                delivered_at_kill = len(delivered)
            ray.get(cluster.controller.kill.remote(coordinator))
            event("share-kill", actor=coordinator, share_state_of=f"{SHARE_GROUP}/{TOPIC}-0",
                  state_partition=state_partition, after_records=delivered_at_kill)
            progress.console.print(
                f"[bold red]killed[/] {coordinator} (share coordinator of {SHARE_GROUP} on {TOPIC}-0, "
                f"__share_group_state-{state_partition}) after {delivered_at_kill} records delivered"
            )
            killed = True
    elapsed = time.time() - started
    progress.update(task, completed=done())
    stop.set()
    for t in threads:
        t.join(60)
    event("share-done", seconds=round(elapsed, 1), accepted=done(), records=len(records),
          polls=len(batch_sizes), largest_poll=max(batch_sizes, default=0))

    with lock:
        not_accepted = [key for key in records if not accepted[key]]
        not_accepted += [key for key in set(acked.values()) if key not in records]  # beyond the end offsets?
        redelivered = sum(1 for key in released if 2 in delivered[key])
        held_twice = [key for key, counts in delivered.items() if len(set(counts)) != len(counts)]
        accepted_twice = [key for key, n in accepted.items() if n > 1]
        deliveries = sum(len(counts) for counts in delivered.values())
    state = _share_state_agrees(cluster.bootstrap, ends)
    if not_accepted:
        event("share-not-accepted", records=sorted(not_accepted)[:50], count=len(not_accepted))
    if held_twice or accepted_twice:
        event("share-held-twice", records=sorted(held_twice)[:50], accepted_twice=sorted(accepted_twice)[:50])
    return {
        "share: deliveries": f"{deliveries} ({SHARE_MEMBERS} consumers, {elapsed:.1f}s)",
        "share: records not accepted": len(not_accepted),
        "share: released": len(released),
        "share: released, then redelivered (count 2)": redelivered,
        "share: held by two at once": len(set(held_twice) | set(accepted_twice)),
        "share: acknowledgements failed": len(ack_errors),
        "share coordinator killed": coordinator if killed else "no (too few records delivered)",
        "share: durable state = end offsets, lag 0": state,
    }


def _share_state_agrees(bootstrap: str, ends: list[int]) -> bool | str:
    """DescribeShareGroupOffsets v1, over the Kafka protocol: the share coordinators' durable view."""
    import asyncio

    from kio.schema.errors import ErrorCode

    from cluster.gateway.apis import ApiKey
    from loadtest.client.connection import Connection

    host, _, port = bootstrap.rpartition(":")

    async def describe() -> dict[int, tuple[int, int]] | str:
        conn = await Connection.open(host, int(port))
        try:
            response = await conn.call(
                ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": SHARE_GROUP, "topics": None}]}
            )
        finally:
            await conn.close()
        group = response.groups[0]
        if group.error_code != ErrorCode.none:
            return f"DescribeShareGroupOffsets: {group.error_code.name}"
        out = {}
        for topic in group.topics:
            for p in topic.partitions:
                if topic.topic_name == TOPIC:
                    if p.error_code != ErrorCode.none:
                        return f"partition {p.partition_index}: {p.error_code.name}"
                    out[p.partition_index] = (p.start_offset, p.lag)
        return out

    want = {p: (end, 0) for p, end in enumerate(ends)}
    got: dict | str = {}
    for _ in range(10):  # a coordinator may still be coming back: a few tries
        got = asyncio.run(describe())
        if got == want:
            return True
        time.sleep(1)
    if isinstance(got, str):
        return got
    return f"(start offset, lag) {[got.get(p) for p in range(PARTITIONS)]} vs end offsets {ends}"


def _print_summary(console: Console, summary: dict, ok: bool) -> None:
    table = Table(title="raygroups demo: actors killed mid-load", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in summary.items():
        style = "" if name != "verdict" else ("[green]" if ok else "[red]")
        table.add_row(name, f"{style}{value}")
    console.print(table)
