"""`raygroups demo`: an embedded cluster, a real Kafka producer and consumer, a leader killed mid-load.

What it proves, in about a minute: records produced with acks=all through the Kafka protocol
survive the hard kill of the actor leading their partition; the controller fails the partition
over, the producer's own retries carry on, and a consumer reads back every acknowledged record
exactly once. The run directory keeps the event log (JSON lines) and a summary.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

TOPIC = "demo-orders"
PARTITIONS = 6


def run_demo(records: int = 2000, out: Path | None = None, console: Console | None = None) -> bool:
    import ray
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from cluster.config import Config
    from cluster.launcher import start_cluster

    console = console or Console()
    run_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="raygroups-demo-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    events: list[dict] = []

    def event(kind: str, **fields) -> None:
        events.append({"time": time.time(), "kind": kind, **fields})

    with console.status("starting an embedded raygroups cluster (Ray + actors)…"):
        cluster = start_cluster(Config({"raygroups.partition.leaders": 3}), run_dir / "data", port=0)
    event("cluster-ready", bootstrap=cluster.bootstrap)
    console.print(f"cluster ready at [bold]{cluster.bootstrap}[/] (data in {run_dir / 'data'})")
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
            future.result(30)

        status = ray.get(cluster.controller.status.remote())
        victim = next(lead["actor"] for lead in status["leaders"] if lead["topic"] == TOPIC and lead["partition"] == 0)

        acked: dict[bytes, tuple[int, int]] = {}
        errors: list[str] = []
        kill_at = records * 2 // 5
        killed = threading.Event()

        def on_delivery(err, msg) -> None:
            if err is not None:
                errors.append(str(err))
                event("delivery-error", error=str(err))
            else:
                acked[msg.key()] = (msg.partition(), msg.offset())

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("producing (acks=all)", total=records)
            for i in range(records):
                key = f"order-{i:06d}".encode()
                producer.produce(TOPIC, key=key, value=json.dumps({"order": i}).encode(), on_delivery=on_delivery)
                producer.poll(0)
                if i == kill_at:
                    producer.flush(30)
                    ray.get(cluster.controller.kill.remote(victim))
                    killed.set()
                    event("kill", actor=victim, after_records=i)
                    progress.console.print(f"[bold red]killed[/] {victim} (leader of {TOPIC}-0) after {i} records")
                progress.update(task, completed=len(acked))
                if i % 50 == 0:
                    time.sleep(0.01)  # a steady load, so the kill lands mid-stream
            while producer.flush(1) > 0:
                progress.update(task, completed=len(acked))
            progress.update(task, completed=len(acked))
            del producer, admin  # librdkafka handles must not outlive the cluster they talk to

            consumer = Consumer(
                {"bootstrap.servers": cluster.bootstrap, "group.id": "demo-reader", "enable.auto.commit": False}
            )
            consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            seen: Counter[bytes] = Counter()
            read = progress.add_task("consuming", total=len(acked))
            deadline = time.time() + 60
            while sum(seen.values()) < len(acked) and time.time() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                seen[msg.key()] += 1
                progress.update(read, completed=sum(seen.values()))
            consumer.close()

        final = ray.get(cluster.controller.status.remote())
        controller_events = final["events"]
        for e in controller_events:
            event("controller-" + e["kind"], message=e["message"], at=e["time"])
        failover = next((e for e in controller_events if e["kind"] == "failover"), None)
        new_leader = next(lead for lead in final["leaders"] if lead["topic"] == TOPIC and lead["partition"] == 0)

        missing = [k for k in acked if seen[k] == 0]
        duplicates = [k for k, n in seen.items() if n > 1]
        ok = not missing and not duplicates and not errors and len(acked) == records
        summary = {
            "records": records,
            "acknowledged": len(acked),
            "delivery_errors": len(errors),
            "consumed": sum(seen.values()),
            "missing": len(missing),
            "duplicates": len(duplicates),
            "killed": victim,
            "new_leader": new_leader["actor"],
            "new_leader_epoch": new_leader["epoch"],
            "failover": failover["message"] if failover else None,
            "verdict": "PASS" if ok else "FAIL",
        }
        table = Table(title="raygroups demo: a leader killed mid-produce", show_header=False)
        table.add_column(style="bold")
        table.add_column()
        for name, value in summary.items():
            style = "" if name != "verdict" else ("[green]" if ok else "[red]")
            table.add_row(name.replace("_", " "), f"{style}{value}")
        console.print(table)
        (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        console.print(f"run directory: [bold]{run_dir}[/] (events.jsonl, summary.json, data/)")
        return ok
    finally:
        with console.status("stopping the cluster…"):
            cluster.stop()
