"""A share partition's lifecycle on its leader: INITIALIZING -> ACTIVE -> FENCED / DROPPED (and
FAILED when the durable state cannot be read), through the SharePartitionManager, without Ray."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from kernel.lifecycle import IllegalTransition
from sharestate.inflight import AcknowledgeType as A
from sharestate.partition_state import SharePartitionState as S
from sharestate.partition_state import check_transition

from tests.local_persister import LocalPersister
from tests.unit.test_share_partition_manager import GROUP, LOCK, Harness, ack, ranges

KEY = (GROUP, "t", 0)


class SlowReads(LocalPersister):
    """Reads wait until the test lets them through."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def read(self, request):
        await self.gate.wait()
        return await super().read(request)


def test_the_transition_table():
    check_transition(S.INITIALIZING, S.ACTIVE)
    check_transition(S.ACTIVE, S.FENCED)
    check_transition(S.INITIALIZING, S.DROPPED)
    for current, target in [(S.ACTIVE, S.INITIALIZING), (S.FENCED, S.ACTIVE), (S.INITIALIZING, S.FENCED), (S.DROPPED, S.ACTIVE)]:
        with pytest.raises(IllegalTransition):
            check_transition(current, target)


def test_fetches_wait_while_initializing_then_the_host_is_active(tmp_path):
    async def main():
        h = await Harness(tmp_path, SlowReads()).start()
        await h.produce(2)
        waiting = asyncio.ensure_future(h.fetch("m1"))
        await asyncio.sleep(0.01)
        assert h.leader.shares.hosts[KEY].state is S.INITIALIZING and not waiting.done()
        h.persister.gate.set()
        assert ranges(await asyncio.wait_for(waiting, 5)) == [(0, 1, 1)]
        assert h.leader.shares.hosts[KEY].state is S.ACTIVE
        await h.leader.shutdown()

    asyncio.run(main())


def test_dropped_while_initializing_answers_not_leader_and_the_next_fetch_starts_afresh(tmp_path):
    async def main():
        h = await Harness(tmp_path, SlowReads()).start()
        await h.produce(1)
        waiting = asyncio.ensure_future(h.fetch("m1"))
        await asyncio.sleep(0.01)
        host = h.leader.shares.hosts[KEY]
        h.leader.shares.drop_partition("t", 0)  # e.g. reloaded at a new epoch meanwhile
        assert host.state is S.DROPPED and KEY not in h.leader.shares.hosts
        h.persister.gate.set()
        out = await asyncio.wait_for(waiting, 5)
        assert out.error_code == ErrorCode.not_leader_or_follower and host.state is S.DROPPED
        assert ranges(await h.fetch("m1")) == [(0, 0, 1)]
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_long_poll_on_a_dropped_host_ends_with_not_leader_and_its_locks_are_gone(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(1)
        await h.fetch("m1")
        host = h.leader.shares.hosts[KEY]
        waiting = asyncio.ensure_future(h.fetch("m2", max_wait_ms=60_000))
        await asyncio.sleep(0.01)
        h.leader.shares.drop_partition("t", 0)
        out = await asyncio.wait_for(waiting, 5)
        assert out.error_code == ErrorCode.not_leader_or_follower
        assert host.state is S.DROPPED
        h.wakeups.advance(LOCK)
        await h.settle()
        assert h.persister.writes == []  # the acquisition lock died with it: no release written
        await h.leader.shutdown()

    asyncio.run(main())


def test_a_fenced_write_ends_the_host_and_a_failed_read_is_tried_again(tmp_path):
    async def main():
        h = await Harness(tmp_path).start()
        await h.produce(1)
        await h.fetch("m1")
        host = h.leader.shares.hosts[KEY]
        h.persister.refuse_writes = ErrorCode.fenced_state_epoch  # e.g. the group's state was reset
        out = await h.fetch("m1", acks=[ack(0, 0, A.ACCEPT)], fetch=False)
        assert out.acknowledge_error_code == ErrorCode.not_leader_or_follower
        assert host.state is S.FENCED and KEY not in h.leader.shares.hosts
        h.persister.refuse_writes = None
        assert ranges(await h.fetch("m2")) == [(0, 0, 1)]  # a new copy, read from the durable state
        await h.leader.shutdown()

    asyncio.run(main())


def test_an_unreadable_state_fails_the_host(tmp_path):
    async def main():
        h = await Harness(tmp_path).start(initialize=False)
        await h.produce(1)
        waiting = asyncio.ensure_future(h.fetch("m1"))
        await asyncio.sleep(0)
        host = h.leader.shares.hosts[KEY]
        out = await asyncio.wait_for(waiting, 5)
        assert out.error_code == ErrorCode.unknown_server_error
        assert host.state is S.FAILED and KEY not in h.leader.shares.hosts
        await h.leader.shutdown()

    asyncio.run(main())
