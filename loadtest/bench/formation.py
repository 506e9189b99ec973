"""Seconds until N confluent classic consumers, each in its own process, form a group.

The processes start and import the client first, then wait on one event; the clock starts when it
is set (every consumer subscribes at once). The group is formed when every consumer has been given
its partitions (on_assign called, maybe with none) and together they hold each partition once.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from typing import Any


def _consumer(bootstrap: str, group: str, topic: str, index: int, go: Any, out: Any, stop: Any) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "log_level": 3, "client.id": f"formed-{index}"})

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        out.put((index, time.time(), sorted(p.partition for p in partitions)))

    def on_revoke(_consumer: Any, _partitions: list[Any]) -> None:
        out.put((index, time.time(), None))

    out.put((index, time.time(), "ready"))
    go.wait()
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        consumer.poll(0.05)
    consumer.close()


def partitions_of(bootstrap: str, topic: str, partitions: int) -> int:
    """Creates the topic (a mock cluster creates it on first metadata, with 4) and says how many it has."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    try:
        for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
            future.result(30)
    except Exception:  # noqa: BLE001 - librdkafka's mock does not serve CreateTopics: it auto-creates
        pass
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topics = producer.list_topics(topic, timeout=10).topics
        if topic in topics and topics[topic].error is None and topics[topic].partitions:
            return len(topics[topic].partitions)
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} never showed up in metadata")


def formation_time(bootstrap: str, consumers: int = 10, partitions: int = 10, timeout_s: float = 120) -> dict[str, float]:
    topic, group = f"formed-{time.monotonic_ns()}", f"formed-{time.monotonic_ns()}"
    have = partitions_of(bootstrap, topic, partitions)
    ctx = mp.get_context("spawn")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(bootstrap, group, topic, i, go, out, stop), daemon=True)
             for i in range(consumers)]
    for p in procs:
        p.start()
    try:
        ready = 0
        while ready < consumers:
            if out.get(timeout=60)[2] == "ready":
                ready += 1
        started = time.time()
        go.set()
        held: dict[int, list[int] | None] = {}
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                index, at, parts = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise RuntimeError(f"{consumers} consumers did not form a group within {timeout_s:g} s") from None
            held[index] = parts
            owned = [p for ps in held.values() if ps is not None for p in ps]
            if len(held) == consumers and None not in held.values() and sorted(owned) == list(range(have)):
                return {"formed_s": at - started, "partitions": have}
    finally:
        stop.set()
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
