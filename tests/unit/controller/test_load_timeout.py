"""A load that never answers (a stuck disk read, an actor that never replies) times out after
`raygroups.load.timeout.ms`; the reconciler then treats it as failed and retries it with its
backoff, level-triggered, until it succeeds. Before, it held the reconciler's lock forever."""

from __future__ import annotations

import asyncio
from collections import Counter

from cluster.control.controller import Controller
from cluster.config import Config
from cluster.metadata import CONSUMER_OFFSETS, TopicSpec
from tests.unit.controller.fake_pool import FakeActor, FakeClock, FakePool
from tests.unit.controller.test_reconciler import SMALL, events, loaded_where_led, settle

TIMEOUT = {"raygroups.load.timeout.ms": 50}


class HangingPool(FakePool):
    """Loads of the partitions in `hanging` never answer, that many times each."""

    def __init__(self) -> None:
        super().__init__()
        self.hanging: Counter[tuple[str, int]] = Counter()
        self.never = asyncio.Event()

    async def load(self, handle: FakeActor, items: list[tuple[str, int, int]]) -> list[str]:
        for topic, p, _ in items:
            if self.hanging[(topic, p)] > 0:
                self.hanging[(topic, p)] -= 1
                await self.never.wait()
        return await super().load(handle, items)


def run_hanging(test, tmp_path):
    """test_reconciler's harness over a HangingPool."""

    async def main() -> None:
        pool, clock = HangingPool(), FakeClock()
        config = Config({**SMALL, **TIMEOUT})
        controller = Controller(config, tmp_path, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        await controller.start()
        try:
            await test(controller, pool, clock)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_load_that_never_answers_times_out_and_is_retried_until_it_succeeds(tmp_path):
    async def test(controller, pool, clock):
        pool.hanging[("slow", 0)] = 2
        await controller.create_topics([TopicSpec("slow", 1)])  # returns: the load timed out
        leader = pool.by_name(controller.leaders[("slow", 0)])
        assert ("slow", 0) not in leader.loaded
        assert ("slow", 0) in controller.reconciler.failed_loads
        assert any("did not answer within 50 ms" in m for m in events(controller, "load-failed"))
        clock.now += 0.5
        await settle(controller)  # the retry hangs too, and times out again
        assert controller.reconciler.failed_loads[("slow", 0)].failures == 2
        clock.now += 1.0
        await settle(controller)
        loaded_where_led(controller, pool)
        assert events(controller, "load-retried") == [f"slow-0 loaded on {leader.name} after 3 tries"]
        assert not controller.reconciler.failed_loads

    run_hanging(test, tmp_path)


def test_a_hanging_load_does_not_block_the_reconciler_for_other_partitions(tmp_path):
    async def test(controller, pool, clock):
        tp = (CONSUMER_OFFSETS, 1)
        pool.hanging[tp] = 1
        target = "group-coordinator-0" if controller.leaders[tp] != "group-coordinator-0" else "group-coordinator-1"
        await asyncio.wait_for(controller.move(*tp, target), 5)
        assert tp in controller.reconciler.failed_loads
        await controller.create_topics([TopicSpec("other", 1)])  # the lock is free again
        assert ("other", 0) in pool.by_name(controller.leaders[("other", 0)]).loaded
        clock.now += 1
        await settle(controller)
        loaded_where_led(controller, pool)

    run_hanging(test, tmp_path)
