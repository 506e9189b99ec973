"""A real group consumer in its own process, so a test can SIGKILL it or stop it cleanly.

    python -m tests.consumer_proc --bootstrap H:P --group G --topic T --out FILE [--session-ms 6000]

Prints `ASSIGNED p,p,...` whenever its assignment changes and `READY` once it has one; appends
`partition offset` to FILE for every record it processes and commits each record's offset
synchronously right after writing it (so what it committed is what it processed). SIGTERM closes
the consumer cleanly (LeaveGroup) and exits 0.
"""

from __future__ import annotations

import argparse
import signal
import sys

from confluent_kafka import Consumer, TopicPartition


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": 500,
        }
    )

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        print("ASSIGNED " + ",".join(str(p.partition) for p in sorted(partitions, key=lambda p: p.partition)), flush=True)

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        print("REVOKED " + ",".join(str(p.partition) for p in partitions), flush=True)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    with open(args.out, "a", buffering=1) as out:
        while not stopping:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                print(f"ERROR {msg.error()}", flush=True)
                continue
            out.write(f"{msg.partition()} {msg.offset()}\n")
            consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    print("CLOSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
