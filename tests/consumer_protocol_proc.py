"""A confluent-kafka consumer speaking KIP-848's consumer protocol (or, with `--protocol classic`,
the classic one, for the migration tests), in its own process.

    python -m tests.consumer_protocol_proc --bootstrap H:P --group G --topic T --out FILE [--protocol classic]

`--topic` may be a regex (`^orders-.*`, as librdkafka takes one). Prints `ADDED t:p,...` and
`REVOKED t:p,...` for every incremental change of its assignment (the consumer protocol never
hands a member its whole assignment again) and `ERROR ...` for errors; appends `topic partition
offset` to FILE for every record and commits its offset synchronously right after (so what it
committed is what it processed), again after STALE_MEMBER_EPOCH (`COMMIT-RETRY`). A classic
member's commit refused by a rebalance is printed (`COMMIT-FAILED topic partition offset`): the
record may be delivered again to the partition's next owner, as Kafka allows. SIGTERM closes it cleanly (a leave heartbeat) and exits 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


def _names(partitions: list[TopicPartition]) -> str:
    return ",".join(f"{p.topic}:{p.partition}" for p in sorted(partitions, key=lambda p: (p.topic, p.partition)))


_REBALANCING = (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID)


def commit(consumer: Consumer, msg: object) -> None:
    """Commit the record's offset, again while the coordinator answers STALE_MEMBER_EPOCH: with this
    protocol a member's epoch moves on each reconciliation step, and a commit sent at the epoch the
    heartbeat just left is refused as Kafka refuses it (ConsumerGroup.validateOffsetCommit). The
    Java consumer retries it with its new epoch by itself; librdkafka hands the error to the
    application, whose retry carries the epoch librdkafka has learned meanwhile."""
    for _ in range(200):
        try:
            consumer.commit(message=msg, asynchronous=False)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if code in _REBALANCING:
                print(f"COMMIT-FAILED {msg.topic()} {msg.partition()} {msg.offset()} {exc.args[0].name()}", flush=True)
                return
            if code != KafkaError.STALE_MEMBER_EPOCH:
                raise
            print("COMMIT-RETRY stale member epoch", flush=True)
            time.sleep(0.05)
    raise RuntimeError("the commit stayed stale for 10 s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--protocol", default="consumer", choices=("consumer", "classic"))
    args = parser.parse_args()

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.protocol": args.protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.protocol == "classic":
        # The consumer protocol takes these from the coordinator; a classic member sets its own.
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "partition.assignment.strategy": "range"})
    consumer = Consumer(conf)

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        print("ADDED " + _names(partitions), flush=True)

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        print("REVOKED " + _names(partitions), flush=True)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    with open(args.out, "a", buffering=1) as out:
        while not stopping:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                print(f"ERROR {msg.error()}", flush=True)
                continue
            out.write(f"{msg.topic()} {msg.partition()} {msg.offset()}\n")
            commit(consumer, msg)
    consumer.close()
    print("CLOSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
