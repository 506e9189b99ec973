"""Per-group share settings on the partition leader (cluster/share/manager.py): a group's
share.auto.offset.reset decides where it starts, its lock duration and delivery count limit apply
to what it acquires, also on a share partition that exists already, and other groups keep the
broker's."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from sharestate.inflight import AcknowledgeType as A
from sharestate.inflight import RecordState as R

from tests.unit.test_share_partition_manager import GROUP, LOCK, Harness, ack, ranges


def test_a_groups_auto_offset_reset_decides_where_it_starts(tmp_path):
    async def main():
        h = await Harness(tmp_path, **{"share.auto.offset.reset": "latest"}).start()
        await h.produce(3)
        h.leader.shares.set_group_configs({GROUP: {"share.auto.offset.reset": "earliest"}})
        out = await h.fetch("m1")
        assert out.error_code == ErrorCode.none and ranges(out) == [(0, 2, 1)]
        await h.leader.shutdown()

    asyncio.run(main())


def test_without_an_override_the_brokers_reset_applies(tmp_path):
    async def main():
        h = await Harness(tmp_path, **{"share.auto.offset.reset": "latest"}).start()
        await h.produce(3)
        h.leader.shares.set_group_configs({"another-group": {"share.auto.offset.reset": "earliest"}})
        assert ranges(await h.fetch("m1")) == []
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_shorter_lock_applies_to_new_acquisitions_of_an_existing_share_partition(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(1)
        assert ranges(await h.fetch("m1")) == [(0, 0, 1)]  # locked for the broker's LOCK
        h.leader.shares.set_group_configs({GROUP: {"share.record.lock.duration.ms": "15000"}})
        assert h.share().config.record_lock_duration_ms == 15_000
        await h.produce(1)
        assert ranges(await h.fetch("m1")) == [(1, 1, 1)]  # locked for 15 s
        h.wakeups.advance(15_000)
        await h.settle()
        offsets = h.share().offsets()
        assert offsets[0][0] is R.ACQUIRED and offsets[1] == (R.AVAILABLE, 1, "")
        h.wakeups.advance(LOCK - 15_000)
        await h.settle()
        assert h.share().offsets()[0] == (R.AVAILABLE, 1, "")
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_groups_delivery_count_limit_archives_earlier(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()  # the broker's limit is 3
        h.leader.shares.set_group_configs({GROUP: {"share.delivery.count.limit": "2"}})
        await h.produce(1)
        await h.fetch("m1")
        out = await h.fetch("m1", acks=[ack(0, 0, A.RELEASE)], max_wait_ms=5000)
        assert ranges(out) == [(0, 0, 2)]
        out = await h.fetch("m1", acks=[ack(0, 0, A.RELEASE)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.none
        assert h.durable().start_offset == 1  # archived after its second delivery
        await h.leader.shutdown()

    asyncio.run(main())


def test_dropping_the_override_brings_back_the_brokers_values(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(1)
        h.leader.shares.set_group_configs({GROUP: {"share.record.lock.duration.ms": "15000"}})
        await h.fetch("m1")
        assert h.share().config.record_lock_duration_ms == 15_000
        h.leader.shares.set_group_configs({})
        assert h.share().config.record_lock_duration_ms == LOCK
        assert h.share().config.delivery_count_limit == 3
        await h.leader.shutdown()

    asyncio.run(main())


def test_share_fetch_answers_the_groups_lock_duration():
    from datetime import timedelta

    from cluster.gateway.handlers import share_fetch
    from tests.unit.gateway.fakes import run
    from tests.unit.test_share_fetch_handler import TOPIC, FakePartitions, _fetch, _gateway, _topic

    gw = _gateway(FakePartitions())
    gw.leadership.group_configs = {"g": {"share.record.lock.duration.ms": "15000"}}
    response = run(share_fetch.share_fetch, gw, _fetch(0, [_topic(TOPIC.topic_id, 0)]))
    assert response.acquisition_lock_timeout == timedelta(seconds=15)
    other = _gateway(FakePartitions())
    other.leadership.group_configs = {"other": {"share.record.lock.duration.ms": "15000"}}
    response = run(share_fetch.share_fetch, other, _fetch(0, [_topic(TOPIC.topic_id, 0)]))
    assert response.acquisition_lock_timeout == timedelta(seconds=30)
