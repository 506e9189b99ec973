"""The gateway runs a handler's coroutine without a Task (server.py `_step`): answered at once when it
never waits, resumed by the future it waits on, answers of one pass in one write, cancelled with
its connection as a Task would be, and handed to a Task after a bare yield."""

from __future__ import annotations

import asyncio

import msgpack

from cluster.gateway.server import KafkaProtocol, ServerStats
from tests.unit.test_gateway_server import RecordingTransport, admin_frame

OK = msgpack.packb({"ok": True})


def serve(dispatch, log):
    protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
    transport = RecordingTransport(log)
    protocol.connection_made(transport)
    return protocol, transport


def test_a_handler_that_never_waits_is_answered_in_the_same_read_without_a_task():
    async def scenario():
        log: list[str] = []

        async def answer():
            return OK

        protocol, transport = serve(lambda request: answer(), log)
        before = len(asyncio.all_tasks())
        protocol.data_received(admin_frame(1, "status") + admin_frame(2, "status"))
        assert log == ["wrote 1", "wrote 2"] and transport.writes == 1
        assert len(asyncio.all_tasks()) == before

    asyncio.run(scenario())


def test_handlers_waiting_on_futures_answer_in_request_order_in_one_write_once_all_are_ready():
    async def scenario():
        log: list[str] = []
        loop = asyncio.get_running_loop()
        waits: dict[int, asyncio.Future] = {}

        async def handler(request):
            waits[request.correlation_id] = loop.create_future()
            first = await waits[request.correlation_id]
            second = await asyncio.sleep(0.001, result=first)  # a second wait, on another future
            return second

        protocol, transport = serve(handler, log)
        protocol.data_received(b"".join(admin_frame(i, "status") for i in (1, 2, 3)))
        waits[2].set_result(OK)
        await asyncio.sleep(0.01)
        assert log == []  # the first answer is not ready: nothing may go out before it
        waits[1].set_result(OK)
        waits[3].set_result(OK)
        await asyncio.sleep(0.01)
        assert log == ["wrote 1", "wrote 2", "wrote 3"]

    asyncio.run(scenario())


def test_a_lost_connection_cancels_the_wait_and_the_handler_sees_it():
    async def scenario():
        log: list[str] = []
        seen: list[str] = []
        wait = asyncio.get_running_loop().create_future()

        async def handler(request):
            try:
                return await wait
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        protocol, _ = serve(handler, log)
        protocol.data_received(admin_frame(1, "status"))
        protocol.connection_lost(None)
        await asyncio.sleep(0)
        assert wait.cancelled() and seen == ["cancelled"] and log == []

    asyncio.run(scenario())


def test_a_bare_yield_goes_on_as_a_task_and_a_failure_after_a_wait_closes_the_connection():
    async def scenario():
        log: list[str] = []
        wait = asyncio.get_running_loop().create_future()

        async def handler(request):
            if request.correlation_id == 1:
                await asyncio.sleep(0)  # a bare yield
                await asyncio.sleep(0)
                return OK
            await wait
            raise RuntimeError("bug")

        protocol, _ = serve(handler, log)
        protocol.data_received(admin_frame(1, "status") + admin_frame(2, "status"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert log == ["wrote 1"]
        wait.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert log == ["wrote 1", "closed"]

    asyncio.run(scenario())
