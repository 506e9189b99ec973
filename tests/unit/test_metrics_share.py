"""Share metrics of a partition leader (issue 13): acknowledgements by type, records acquired, and
each share partition's records in flight and oldest lock, counted at scrape time (no Ray)."""

from __future__ import annotations

import asyncio

from sharestate.inflight import AcknowledgeType as A
from sharestate.state_batches import AcknowledgementBatch

from cluster.metrics.registry import REGISTRY
from tests.unit.test_share_partition_manager import GROUP, Harness, ack


def _counter(name: str, **labels: str) -> float:
    return sum(v for n, ls, v in REGISTRY.snapshot()["counters"] if n == name and all(ls.get(k) == w for k, w in labels.items()))


def _gauges(h: Harness) -> dict[tuple[str, str], float]:
    host = h.leader.shares.hosts[(GROUP, "t", 0)]
    return {(name, labels.get("state", "")): v for name, labels, v in host.gauges(h.clock.now_ms())}


def test_acknowledgements_count_records_by_type_and_the_oldest_held_lock_has_an_age(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(4)
        await h.produce(3)
        accepted, released, rejected = (_counter("share_acknowledgements", type=t) for t in ("accept", "release", "reject"))
        acquired = _counter("share_records_acquired")

        await h.fetch("m1", max_records=4)  # offsets 0-3, locked now
        h.clock.advance(1500)
        await h.fetch("m2")  # offsets 4-6, locked 1.5 s later
        h.clock.advance(500)
        gauges = _gauges(h)
        assert gauges[("share_partition_records_in_flight", "acquired")] == 7
        assert gauges[("share_partition_oldest_lock_age_ms", "")] == 2000

        # One batch for all of 0-3 (accept), one type per offset for 4-6.
        await h.fetch("m1", acks=[ack(0, 3, A.ACCEPT)], fetch=False)
        await h.fetch("m2", acks=[AcknowledgementBatch(4, 6, (int(A.RELEASE), int(A.REJECT), int(A.ACCEPT)))], fetch=False)
        await h.settle()
        assert _counter("share_records_acquired") - acquired == 7
        assert _counter("share_acknowledgements", type="accept") - accepted == 5
        assert _counter("share_acknowledgements", type="release") - released == 1
        assert _counter("share_acknowledgements", type="reject") - rejected == 1
        gauges = _gauges(h)
        assert gauges[("share_partition_records_in_flight", "acquired")] == 0
        assert gauges[("share_partition_oldest_lock_age_ms", "")] == 0  # the locks left are of no record
        await h.leader.shutdown()

    asyncio.run(main())
