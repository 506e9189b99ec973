"""A confluent_kafka.ShareConsumer in its own process, as users run one; what it saw, as JSON lines.

    python -m tests.share_consumer_proc BOOTSTRAP GROUP TOPIC [--mode implicit|explicit]
        [--policy accept|mix|hold] [--idle SECONDS] [--max SECONDS] [--poll-sleep SECONDS]

stdout, one JSON object per line, flushed at once (a test may SIGKILL this process any time):
    {"e": "delivered", "p": 0, "o": 12, "dc": 1, "t": "accept"}   t: what it decided
    {"e": "acked", "p": 0, "o": [12, 13], "ok": true}              the broker's answer to acks
    {"e": "end"}                                                    closed cleanly

Policies: accept everything; `mix` releases offsets divisible by 5 on their first delivery,
rejects offsets ≡ 3 (mod 7) and accepts the rest; `hold` acknowledges nothing and, after the
first records, waits to be killed or stopped. The process ends after `idle` seconds without a
record, or `max` seconds in all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer


def emit(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def decide(policy: str, offset: int, delivery_count: int) -> str:
    if policy == "mix":
        if offset % 5 == 0 and delivery_count == 1:
            return "release"
        if offset % 7 == 3:
            return "reject"
    return "accept"


TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("group")
    ap.add_argument("topic")
    ap.add_argument("--mode", default="implicit", choices=("implicit", "explicit"))
    ap.add_argument("--policy", default="accept", choices=("accept", "mix", "hold"))
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--max", type=float, default=120.0)
    ap.add_argument("--poll-sleep", type=float, default=0.0, help="seconds of 'processing' after each non-empty poll")
    args = ap.parse_args()

    consumer = ShareConsumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "share.acknowledgement.mode": "explicit" if args.policy == "hold" else args.mode,
        }
    )

    def on_commit(offsets, error) -> None:
        for tp, acked in offsets.items():
            emit(e="acked", p=tp.partition, o=sorted(acked), ok=error is None, error=str(error) if error else None)

    consumer.set_acknowledgement_commit_callback(on_commit)
    consumer.subscribe([args.topic])
    emit(e="started")
    started = last = time.time()
    while time.time() - started < args.max and time.time() - last < args.idle:
        for msg in consumer.poll(0.5) or []:
            if msg.error():
                emit(e="error", error=str(msg.error()))
                continue
            last = time.time()
            decision = "hold" if args.policy == "hold" else decide(args.policy, msg.offset(), msg.delivery_count())
            emit(e="delivered", p=msg.partition(), o=msg.offset(), dc=msg.delivery_count(), t=decision)
            if args.mode == "explicit" and decision != "hold":
                consumer.acknowledge(msg, TYPES[decision])
        if args.poll_sleep and last > time.time() - 0.6:
            time.sleep(args.poll_sleep)
        if args.policy == "hold" and last > started:
            emit(e="holding")
            while True:
                time.sleep(1)
    if args.policy != "hold":
        consumer.commit_sync()  # implicit mode accepts the last poll's records only when told to
    consumer.close()
    emit(e="end")


if __name__ == "__main__":
    main()
