"""The actor channel (cluster/channels) and the link that chooses it (cluster/clients/links.py):
frames split anywhere, calls answered by id, exceptions carried, only Endpoint methods callable,
every call under way failed with ChannelClosed when the actor's side goes, and a link that moves
to the channel only once its Ray calls are back."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.calls import Endpoint
from cluster.channels import ChannelClient, ChannelClosed, ChannelServer
from cluster.channels.frames import FrameBuffer, call_frame, parse_call
from cluster.clients.failures import ACTOR_GONE
from cluster.clients.links import ActorLink


@given(st.lists(st.tuples(st.integers(0, 2**63), st.text(min_size=1, max_size=20), st.binary(max_size=300)),
                min_size=1, max_size=8), st.integers(1, 64))
def test_frames_come_out_whole_however_the_bytes_are_split(calls, chunk):
    stream = b"".join(call_frame(i, m, (payload,), {}) for i, m, payload in calls)
    buffer, frames = FrameBuffer(), []
    for at in range(0, len(stream), chunk):
        frames += buffer.feed(stream[at:at + chunk])
    assert [parse_call(f) for f in frames] == [(i, m, (payload,), {}) for i, m, payload in calls]


def test_a_corrupt_size_is_refused():
    with pytest.raises(ValueError):
        FrameBuffer().feed(b"\xff\xff\xff\xff")


class Target:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []

    async def execute(self, items):
        self.started.append(f"execute {items}")
        return [x * 2 for x in items]

    async def fetch(self, items, wait):
        self.started.append("fetch")
        await self.release.wait()
        return ("fetched", items, wait)

    def share_wake(self, keys):  # a plain method, as some actor methods are
        return len(keys)

    async def produce(self, items):
        raise KeyError("no such partition")

    async def shutdown(self):
        return "not an endpoint"


def run(coro):
    return asyncio.run(coro)


def test_calls_are_answered_by_id_and_a_slow_one_does_not_hold_back_the_others(tmp_path):
    async def main():
        target = Target()
        server = ChannelServer(target, {"execute", "fetch", "share_wake", "produce"})
        client = await ChannelClient.open(await server.start())
        slow = client.call("fetch", [1], wait=500)
        fast = await asyncio.wait_for(client.call("execute", [1, 2, 3]), 5)
        woken = await client.call("share_wake", ["a", "b"])
        assert not slow.done()
        target.release.set()
        assert await slow == ("fetched", [1], 500)
        assert target.started == ["fetch", "execute [1, 2, 3]"]  # started in the order they came
        client.close()
        server.close()
        return fast, woken

    assert run(main()) == ([2, 4, 6], 2)


def test_an_exception_is_raised_at_the_caller_and_only_endpoints_are_callable():
    async def main():
        server = ChannelServer(Target(), {"execute", "produce"})
        client = await ChannelClient.open(await server.start())
        with pytest.raises(KeyError, match="no such partition"):
            await client.call("produce", [])
        with pytest.raises(AttributeError, match="shutdown is not callable"):
            await client.call("shutdown")
        assert await client.call("execute", [5]) == [10]  # the channel goes on
        client.close()
        server.close()

    run(main())


def test_the_actors_side_closing_fails_every_call_under_way_as_an_actor_gone():
    async def main():
        target = Target()
        server = ChannelServer(target, {"fetch"})
        client = await ChannelClient.open(await server.start())
        pending = client.call("fetch", [1], wait=1)
        while not target.started:
            await asyncio.sleep(0)
        server.close()
        with pytest.raises(ChannelClosed) as caught:
            await pending
        assert isinstance(caught.value, ACTOR_GONE)
        with pytest.raises(ChannelClosed):
            await client.call("fetch", [2], wait=1)

    run(main())


class Remote:
    """A Ray method stand-in whose calls finish when the test says."""

    def __init__(self, answer=None) -> None:
        self.calls: list[tuple] = []
        self.answer = answer
        self.gate = asyncio.Event()

    def remote(self, *args, **kwargs):
        self.calls.append(args)

        async def done():
            await self.gate.wait()
            return self.answer(*args) if callable(self.answer) else self.answer
        return asyncio.ensure_future(done())


class Handle:
    def __init__(self, address) -> None:
        self.execute = Remote(lambda items: ["ray", items])
        self.channel_address = Remote(lambda: address)
        self.channel_address.gate.set()


def test_a_link_moves_to_the_channel_only_once_its_ray_calls_are_back():
    async def main():
        server = ChannelServer(Target(), {"execute"})
        handle = Handle(("node-1", await server.start()))
        link = ActorLink(handle, "node-1")
        first = link.call(Endpoint.SHARE_STATE, [1])  # through Ray, and asks for the channel
        while link.channel is None:
            await asyncio.sleep(0.01)
        second = link.call(Endpoint.SHARE_STATE, [2])  # the first is still under way: Ray again, in order
        assert handle.execute.calls == [([1],), ([2],)]  # both went through Ray
        handle.execute.gate.set()
        assert await first == ["ray", [1]] and await second == ["ray", [2]]
        assert await link.call(Endpoint.SHARE_STATE, [3]) == [6]  # now over the channel
        assert len(handle.execute.calls) == 2
        link.close()
        server.close()

    run(main())


def test_a_link_to_an_actor_on_another_node_stays_on_ray():
    async def main():
        handle = Handle(("node-2", "/nowhere.sock"))
        link = ActorLink(handle, "node-1")
        handle.execute.gate.set()
        assert await link.call(Endpoint.SHARE_STATE, [1]) == ["ray", [1]]
        await asyncio.sleep(0.01)
        assert await link.call(Endpoint.SHARE_STATE, [2]) == ["ray", [2]]
        assert link.channel is None and len(handle.channel_address.calls) == 1

    run(main())


def test_a_call_cancelled_by_its_caller_is_cancelled_at_the_actor():
    """A fetch's long poll that is no longer needed stops at the actor, as ray.cancel stops it."""
    async def main():
        started, stopped = asyncio.Event(), asyncio.Event()

        class Poller:
            async def fetch(self, items, wait):
                started.set()
                try:
                    await asyncio.sleep(wait)
                except asyncio.CancelledError:
                    stopped.set()
                    raise

        server = ChannelServer(Poller(), {"fetch"})
        client = await ChannelClient.open(await server.start())
        poll = client.call("fetch", [1], wait=60)
        await asyncio.wait_for(started.wait(), 5)  # under way at the actor (not cancelled before it began)
        poll.cancel()
        await asyncio.wait_for(stopped.wait(), 5)
        assert client.pending == {}
        client.close()
        server.close()

    run(main())
