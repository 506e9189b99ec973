"""ControllerClient: each typed call reaches the controller method of the same meaning."""

from __future__ import annotations

import asyncio

from cluster.clients.controller import ControllerClient


class _Method:
    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    def remote(self, *args):
        self.calls.append((self.name, args))
        future = asyncio.get_event_loop().create_future() if _in_loop() else None
        if future is not None:
            future.set_result(self.name)
        return future


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


class _Handle:
    def __init__(self) -> None:
        self.calls: list = []

    def __getattr__(self, name: str) -> _Method:
        return _Method(name, self.calls)


def test_calls_go_to_the_controller_methods_with_their_arguments():
    handle = _Handle()
    client = ControllerClient(handle)

    async def main() -> None:
        assert await client.move("t", 1, "partition-leader-0") == "move"
        assert await client.kill_actor("gateway-0") == "kill"
        assert await client.create_partitions("t", 4, True) == "create_partitions"
        client.kill_actor_soon("gateway-1")

    asyncio.run(main())
    assert handle.calls == [
        ("move", ("t", 1, "partition-leader-0")),
        ("kill", ("gateway-0",)),
        ("create_partitions", ("t", 4, True)),
        ("kill", ("gateway-1",)),
    ]
