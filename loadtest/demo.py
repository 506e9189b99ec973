"""`raygroups demo`: an embedded cluster, real Kafka clients, and two actors killed mid-load.

1. A confluent-kafka producer writes with acks=all while the actor leading one of the topic's
   partitions is killed: the controller fails the partition over and the producer's own retries
   carry on.
2. A three-member classic consumer group reads everything back while the group coordinator actor
   that leads the group's `__consumer_offsets` partition is killed: the new leader replays the
   group from the log and the members keep their generation (no rebalance).
The verdict: every acknowledged record consumed exactly once, committed offsets at the end of
every partition, no member rebalanced by the coordinator failover. The run directory keeps the
event log (JSON lines) and a summary.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections import Counter
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

    console = console or Console()
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="raygroups-demo-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    event = EventLog()
    config = Config({"raygroups.partition.leaders": 3, "group.initial.rebalance.delay.ms": 500})
    with console.status("starting an embedded raygroups cluster (Ray + actors)…"):
        cluster = start_cluster(config, run_dir / "data", port=0)
    event("cluster-ready", bootstrap=cluster.bootstrap)
    console.print(f"cluster ready at [bold]{cluster.bootstrap}[/] (data in {run_dir / 'data'})")
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console) as progress:
            acked, produce_summary = _produce_with_leader_kill(cluster, records, progress, event)
            consume_summary = _consume_as_group_with_coordinator_kill(cluster, acked, progress, event)
        import ray

        for e in ray.get(cluster.controller.status.remote())["events"]:
            event("controller-" + e["kind"], message=e["message"], at=e["time"])
        summary = {**produce_summary, **consume_summary}
        ok = (
            summary["delivery errors"] == 0
            and summary["acknowledged"] == records
            and summary["missing"] == 0
            and summary["duplicates"] == 0
            and summary["rebalances after coordinator kill"] == 0
            and summary["committed = end offsets"] is True
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


def _print_summary(console: Console, summary: dict, ok: bool) -> None:
    table = Table(title="raygroups demo: actors killed mid-load", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in summary.items():
        style = "" if name != "verdict" else ("[green]" if ok else "[red]")
        table.add_row(name, f"{style}{value}")
    console.print(table)
