"""The controller enforces the partition limits itself (issue 10): each gateway checks against its
own view of the metadata, so two gateways creating topics at the same time could together pass
raygroups.max.partitions; the controller's check runs on the one metadata, under its lock."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kio.schema.errors import ErrorCode

from cluster.control.controller import Controller
from cluster.config import Config
from cluster.metadata import TopicSpec
from tests.unit.controller.fake_pool import FakeClock, FakePool

SETTINGS = {
    "offsets.topic.num.partitions": 3,
    "share.coordinator.state.topic.num.partitions": 2,
    "raygroups.coordinators": 1,
    "raygroups.share.coordinators": 1,
    "raygroups.partition.leaders": 1,
    "raygroups.max.partitions.per.topic": 100,
    # the internal topics hold 5 of them
    "raygroups.max.partitions": 150,
}


def run(test, tmp_path: Path) -> None:
    async def main() -> None:
        controller = Controller(Config(SETTINGS), tmp_path, "127.0.0.1", 0, "test", pool=FakePool(), clock=FakeClock())
        await controller.start()
        try:
            await test(controller)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_two_gateways_creating_at_once_cannot_pass_the_cluster_limit(tmp_path):
    async def test(controller: Controller) -> None:
        # Both gateways saw 5 partitions and let their 100 through; the controller takes one of them.
        outcomes = await asyncio.gather(
            controller.create_topics([TopicSpec("a", 100)]), controller.create_topics([TopicSpec("b", 100)])
        )
        codes = sorted(o[0].error_code for o in outcomes)
        assert codes == sorted([ErrorCode.none, ErrorCode.policy_violation])
        assert controller._meta().partition_count() == 105
        refused = next(o[0] for o in outcomes if o[0].error_code != ErrorCode.none)
        assert "raygroups.max.partitions" in refused.message

    run(test, tmp_path)


def test_the_controller_refuses_a_bomb_and_growth_past_the_limits(tmp_path):
    async def test(controller: Controller) -> None:
        for validate_only in (True, False):
            (bomb,) = await controller.create_topics([TopicSpec("bomb", 2_147_483_647)], validate_only)
            assert bomb.error_code == ErrorCode.policy_violation
        (ok,) = await controller.create_topics([TopicSpec("t", 100)])
        assert ok.error_code == ErrorCode.none
        for total in (101, 2_147_483_647):
            grown = await controller.create_partitions("t", total)
            assert grown.error_code == ErrorCode.policy_violation
        (other,) = await controller.create_topics([TopicSpec("u", 40)])
        assert other.error_code == ErrorCode.none
        assert (await controller.create_partitions("u", 46)).error_code == ErrorCode.policy_violation
        assert (await controller.create_partitions("u", 45, validate_only=True)).error_code == ErrorCode.none
        assert controller._meta().partition_count() == 145

    run(test, tmp_path)
