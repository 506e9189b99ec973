"""The gateway's socket side: answers in request order, and an action that must follow an answer."""

from __future__ import annotations

import asyncio
import struct

import msgpack

from cluster.gateway.apis import ADMIN_API_KEY
from cluster.gateway.server import KafkaProtocol, ServerStats


class RecordingTransport(asyncio.Transport):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        # One write may carry several answers (those ready in one pass): log each frame.
        self.writes = getattr(self, "writes", 0) + 1
        pos = 0
        while pos < len(data):
            size, correlation_id = struct.unpack_from(">ii", data, pos)
            self.log.append(f"wrote {correlation_id}")
            pos += 4 + size

    def close(self) -> None:
        self.log.append("closed")


def admin_frame(correlation_id: int, op: str) -> bytes:
    body = struct.pack(">hhih", ADMIN_API_KEY, 0, correlation_id, -1) + msgpack.packb({"op": op})
    return struct.pack(">i", len(body)) + body


def test_an_action_after_the_reply_runs_once_that_reply_is_written_and_in_order():
    async def scenario() -> list[str]:
        log: list[str] = []
        slow = asyncio.get_running_loop().create_future()

        def dispatch(request):
            if request.correlation_id == 1:
                return slow  # answered later: the second reply must wait behind it
            request.after_reply = lambda: log.append("after 2")
            return msgpack.packb({"ok": True})

        protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
        protocol.connection_made(RecordingTransport(log))
        protocol.data_received(admin_frame(1, "status") + admin_frame(2, "kill"))
        assert log == []
        slow.set_result(msgpack.packb({"ok": True}))
        await asyncio.sleep(0)  # let the future's done callback run
        return log

    assert asyncio.run(scenario()) == ["wrote 1", "wrote 2", "after 2"]


def test_a_failed_handler_drops_only_its_connection_after_the_answers_before_it():
    async def scenario() -> list[str]:
        log: list[str] = []

        async def broken():
            raise RuntimeError("bug")

        def dispatch(request):
            return broken() if request.correlation_id == 2 else msgpack.packb({"ok": True})

        protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
        protocol.connection_made(RecordingTransport(log))
        protocol.data_received(admin_frame(1, "status") + admin_frame(2, "status") + admin_frame(3, "status"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return log

    assert asyncio.run(scenario()) == ["wrote 1", "closed"]


def test_reading_pauses_while_too_many_answers_are_outstanding():
    class PausingTransport(RecordingTransport):
        def pause_reading(self) -> None:
            self.log.append("pause")

        def resume_reading(self) -> None:
            self.log.append("resume")

    async def scenario() -> list[str]:
        log: list[str] = []
        loop = asyncio.get_running_loop()
        waiting = []

        def dispatch(request):
            waiting.append(loop.create_future())
            return waiting[-1]

        protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
        protocol._conn.max_outstanding = 2
        protocol.connection_made(PausingTransport(log))
        protocol.data_received(b"".join(admin_frame(i, "status") for i in range(3)))
        assert log == ["pause"]
        for future in waiting:
            future.set_result(msgpack.packb({"ok": True}))
        await asyncio.sleep(0)
        return log

    # The three answers are ready in the same pass, so they share one write, then reading resumes
    # (before the writes were coalesced, "resume" came between "wrote 1" and "wrote 2").
    assert asyncio.run(scenario()) == ["pause", "wrote 0", "wrote 1", "wrote 2", "resume"]


def test_answers_ready_in_one_pass_share_one_write_in_request_order():
    async def scenario() -> tuple[list[str], int]:
        log: list[str] = []
        loop = asyncio.get_running_loop()
        waiting = []

        def dispatch(request):
            if request.correlation_id == 0:
                return msgpack.packb({"ok": True})  # answered at once, but written with the others
            waiting.append(loop.create_future())
            return waiting[-1]

        transport = RecordingTransport(log)
        protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
        protocol.connection_made(transport)
        protocol.data_received(b"".join(admin_frame(i, "status") for i in range(5)))
        assert log == ["wrote 0"]
        for future in reversed(waiting):  # completion order must not change the answer order
            future.set_result(msgpack.packb({"ok": True}))
        await asyncio.sleep(0)
        return log, transport.writes

    log, writes = asyncio.run(scenario())
    assert log == [f"wrote {i}" for i in range(5)] and writes == 2


def test_a_close_after_a_reply_writes_the_answers_before_it_then_closes():
    async def scenario() -> list[str]:
        log: list[str] = []
        loop = asyncio.get_running_loop()
        waiting = []

        def dispatch(request):
            if request.correlation_id == 2:
                request.close_after_reply = "authentication failed"
                request.after_reply = lambda: log.append("after 2")
            waiting.append(loop.create_future())
            return waiting[-1]

        protocol = KafkaProtocol(dispatch, 1 << 20, ServerStats())
        protocol.connection_made(RecordingTransport(log))
        protocol.data_received(b"".join(admin_frame(i, "status") for i in range(1, 5)))
        for future in waiting:
            future.set_result(msgpack.packb({"ok": True}))
        await asyncio.sleep(0)
        return log

    assert asyncio.run(scenario()) == ["wrote 1", "wrote 2", "after 2", "closed"]
