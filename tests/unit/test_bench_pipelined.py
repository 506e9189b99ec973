"""The light produce/fetch client (loadtest/bench/pipelined.py): its batch walk, and a whole run
against the do-nothing responder, which stores nothing but answers offsets and canned batches."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cluster.recordbatch import encode_records, iter_batches
from loadtest.bench import pipelined


def test_batch_spans_are_the_headers_offsets_and_leave_a_cut_batch_out():
    data = b"".join(encode_records([(i, b"k", b"v" * 50) for i in range(n)], 1) for n in (1, 5, 100))
    assert pipelined._batch_spans(data) == [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]
    assert pipelined._batch_spans(data[:-3]) == [(0, 0), (0, 4)]
    assert pipelined._batch_spans(b"") == []


@pytest.fixture
def responder():
    from cluster.gateway.server import serve
    from loadtest.responder import Responder

    loop = asyncio.new_event_loop()

    async def start():
        r = Responder("127.0.0.1", 0, 3)
        server, _ = await serve(r.dispatch, "127.0.0.1", 0, 1 << 22)
        r.port = server.sockets[0].getsockname()[1]
        return server, f"127.0.0.1:{r.port}"

    async def stop(server):
        server.close()
        await server.wait_closed()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server, bootstrap = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    yield bootstrap
    asyncio.run_coroutine_threadsafe(stop(server), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_produce_then_fetch_every_record_back(responder):
    assert asyncio.run(pipelined.produce(responder, "t", 3, 3 * 100 * 7, batch_records=100, depth=4)) > 0
    assert asyncio.run(pipelined.fetch(responder, "t", 3, 3 * 100 * 7)) > 0


def test_a_fetch_of_more_than_was_produced_fails_rather_than_waits(responder, monkeypatch):
    monkeypatch.setattr(pipelined, "_EMPTY_ANSWERS", 2)
    asyncio.run(pipelined.produce(responder, "short", 3, 3 * 100, batch_records=100))
    with pytest.raises(RuntimeError, match="answered no record past offset 100"):
        asyncio.run(pipelined.fetch(responder, "short", 3, 3 * 200))
