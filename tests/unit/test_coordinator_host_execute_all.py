"""A batched call runs its operations in order with no task each; runtime failures become error
codes per item, and an operation's own failure still fails the call."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from kernel.result import Result

from cluster.calls.kinds import ActorKind
from cluster.actors.coordinator_host import CoordinatorHost
from cluster.calls import CoordinatorItem, Failed
from cluster.config import Config
from cluster.metadata import CODEC

TOPIC = "__consumer_offsets"


class EchoShard:
    def __init__(self, tp, clock) -> None:
        self.seen: list[str] = []

    def replay(self, record) -> None:
        pass

    def on_loaded(self) -> Result:
        return Result()

    def echo(self, request, token) -> Result:
        if request == "boom":
            raise ValueError("boom")
        self.seen.append(request)
        return Result(response=f"{request}!")


# An operation as the actors see one: what it runs on the shard (cluster/calls/operations.py).
ECHO = SimpleNamespace(run=EchoShard.echo, reads=False)


def echo(partition, epoch, request):
    return CoordinatorItem(ECHO, partition, epoch, request)


def test_execute_all_answers_in_order_and_maps_runtime_errors(tmp_path):
    async def main():
        host = CoordinatorHost("gc-0", ActorKind.GROUP_COORDINATOR, CODEC, EchoShard, Config(), tmp_path)
        await host.load([(TOPIC, 0, 1)])
        tasks_before = len(asyncio.all_tasks())
        call = asyncio.ensure_future(host.execute_all(TOPIC, [
            echo(0, 1, "a"), echo(1, 1, "nowhere"), echo(0, 7, "stale"), echo(0, 1, "b")]))
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) - tasks_before <= 2  # the call and the partition's drain, not one per item
        outcomes = await call
        assert outcomes[0] == "a!" and outcomes[3] == "b!"
        assert isinstance(outcomes[1], Failed) and outcomes[1].error_code == ErrorCode.not_coordinator
        assert isinstance(outcomes[2], Failed) and outcomes[2].error_code == ErrorCode.not_coordinator
        assert host.runtime.shard((TOPIC, 0)).seen == ["a", "b"]
        with pytest.raises(ValueError):
            await host.execute_all(TOPIC, [echo(0, 1, "c"), echo(0, 1, "boom")])
        assert await host.execute(TOPIC, echo(3, 1, "x")) == Failed(
            ErrorCode.not_coordinator, "not the coordinator of __consumer_offsets-3 at epoch 1")
        await host.shutdown()

    asyncio.run(main())
