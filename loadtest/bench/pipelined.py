"""The light produce/fetch client: requests encoded once, pipelined over a few connections, so that
one client core offers far more than either server can take (issue 24: kcat, librdkafka's C
client, tops out near one core producing).

Produce: one request carries one batch of `batch_records` records for every partition, acks=all;
the same bytes go out every time with only the correlation id patched (the server gives each
batch its offsets). Every answer is decoded and must carry no error, and the base offsets it
answers must add up: on every partition the highest is (batches - 1) × batch_records past the
lowest.

Fetch: every partition on a connection of its own, each request from where the last answer
ended (1 MiB per partition, Kafka's max.partition.fetch.bytes), the offset patched into one
encoded request (found by encoding it once with a sentinel offset). Partition by partition, not
one request for all: tansu 0.6 fills the first partition of a request up to about 5 MB and
answers nothing for the others, whatever their byte limits. Every answer is decoded; the records
counted are those of the batches read back, and every record produced must come back.

Produce keeps `depth` requests in flight on each connection, the next request going to whichever
connection answers; fetch one per partition. Why hand-written rather than a library: no Kafka
client sends pre-encoded requests, and encoding is what would make the client the limit.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from cluster.gateway.apis import ApiKey, response_class
from cluster.record_batch_writer import write_batch
from loadtest.bench.latency import encode_request

CLIENT_ID = "bench-light"
PRODUCE_VERSION, FETCH_VERSION = 9, 12  # flexible versions tansu 0.6 and raygroups both serve
_SENTINEL = 0x0123_4567_89AB_0000  # a fetch offset that cannot occur in the rest of the request
_EMPTY_ANSWERS = 10
# Record batch v2: baseOffset int64, batchLength int32, ..., lastOffsetDelta int32 at byte 23.
_BASE_AND_LENGTH, _INT, _LAST_DELTA_AT = struct.Struct(">qi"), struct.Struct(">i"), 23


def _decoder(api_key: int, version: int) -> Callable[[bytes], Any]:
    cls = response_class(api_key, version)
    header, body = entity_reader(cls.__header_schema__), entity_reader(cls)
    return lambda payload: body(payload, header(payload, 0)[1])[0]


class _Pipe(asyncio.Protocol):
    """One connection: up to `depth` requests in flight; each answer, in request order, goes to
    `answered` with what `take` gave for its request; `take` returning None means no more."""

    def __init__(self, take: Callable[[], tuple[Any, bytes] | None], answered: Callable[[Any, bytes], None],
                 depth: int, ended: Callable[[Exception | None], None]) -> None:
        self.take, self.answered, self.depth, self.ended = take, answered, depth, ended
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.sent: deque[Any] = deque()  # what each request in flight was for, oldest first
        self.finished = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        for _ in range(self.depth):
            self._send_next()
        self._end_if_done()

    def _send_next(self) -> None:
        work = self.take()
        if work is not None:
            self.sent.append(work[0])
            assert self.transport is not None
            self.transport.write(work[1])

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        start = 0
        try:
            while len(buffer) - start >= 4:
                size = struct.unpack_from(">i", buffer, start)[0]
                if len(buffer) - start - 4 < size:
                    break
                payload = bytes(buffer[start + 4:start + 4 + size])
                start += 4 + size
                self.answered(self.sent.popleft(), payload)
                self._send_next()
        except Exception as exc:  # noqa: BLE001 - a wrong answer ends the run with that error
            self._end(exc)
            return
        del buffer[:start]
        self._end_if_done()

    def _end_if_done(self) -> None:
        if not self.sent:
            self._end(None)

    def _end(self, exc: Exception | None) -> None:
        if not self.finished:
            self.finished = True
            self.ended(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.sent:
            self._end(ConnectionError(f"the broker closed a connection with {len(self.sent)} requests unanswered"))


async def _pipelined(bootstrap: str, pipes: list[tuple[Callable[[], tuple[Any, bytes] | None],
                                                       Callable[[Any, bytes], None]]], depth: int,
                     timeout_s: float = 600) -> float:
    """Run one connection per (take, answered) pair until every one has nothing left to send and
    nothing in flight; the wall seconds until the last answer. The first error ends the run."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    left = len(pipes)

    def ended(exc: Exception | None) -> None:
        nonlocal left
        left -= 1
        if done.done():
            return
        if exc is not None:
            done.set_exception(exc)
        elif left == 0:
            done.set_result(None)

    transports = []
    start = time.perf_counter()
    try:
        for take, answered in pipes:
            transport, _ = await loop.create_connection(lambda: _Pipe(take, answered, depth, ended), host, int(port))
            transports.append(transport)
        try:
            await asyncio.wait_for(done, timeout_s)
        except asyncio.TimeoutError:
            raise RuntimeError(f"the run did not end within {timeout_s:g} s") from None
        return time.perf_counter() - start
    finally:
        for transport in transports:
            transport.close()


def _batch_spans(records: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each whole batch: the two fields read where the record batch
    format puts them, not the whole header (recordbatch.iter_batches), which made the client the
    limit reading tansu's 5 MB answers. A batch cut off at the end (a broker may send a partial
    one last) is left out, as clients skip it."""
    spans, pos, end = [], 0, len(records)
    while pos + _LAST_DELTA_AT + 4 <= end:
        base, length = _BASE_AND_LENGTH.unpack_from(records, pos)
        if pos + 12 + length > end:
            break
        spans.append((base, base + _INT.unpack_from(records, pos + _LAST_DELTA_AT)[0]))
        pos += 12 + length
    return spans


def _correlated(template: bytearray) -> Callable[[int], bytes]:
    def frame(k: int) -> bytes:
        struct.pack_into(">i", template, 8, k + 1)
        return bytes(template)  # the transport may keep what it cannot send at once
    return frame


async def produce(bootstrap: str, topic: str, partitions: int, records: int, batch_records: int = 100,
                  value_bytes: int = 100, connections: int = 2, depth: int = 8) -> float:
    """Produce `records` (a multiple of partitions × batch_records) with acks=all; wall seconds."""
    requests = records // (partitions * batch_records)
    batch = write_batch([(i, f"key-{i:07d}".encode(), b"v" * value_bytes) for i in range(batch_records)],
                        int(time.time() * 1000))
    template = encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, {
        "transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [
            {"index": p, "records": batch} for p in range(partitions)]}]}, client_id=CLIENT_ID)
    decode = _decoder(ApiKey.PRODUCE, PRODUCE_VERSION)
    highest, lowest = [-1] * partitions, [2**63] * partitions

    def check(_k: int, payload: bytes) -> None:
        for topic_response in decode(payload).responses:
            for p in topic_response.partition_responses:
                if p.error_code != ErrorCode.none:
                    raise RuntimeError(f"Produce to partition {p.index}: {ErrorCode(p.error_code).name}")
                highest[p.index] = max(highest[p.index], p.base_offset)
                lowest[p.index] = min(lowest[p.index], p.base_offset)

    frame, sent = _correlated(template), [0]

    def take() -> tuple[int, bytes] | None:  # shared: the next request goes where an answer came
        if sent[0] >= requests:
            return None
        sent[0] += 1
        return sent[0], frame(sent[0])

    wall = await _pipelined(bootstrap, [(take, check)] * connections, depth)
    spread = [hi - lo for hi, lo in zip(highest, lowest)]
    if requests and spread != [(requests - 1) * batch_records] * partitions:
        raise RuntimeError(f"the batches were answered at offsets {lowest} to {highest}: not {requests:,} batches of "
                           f"{batch_records} on every partition")
    return wall


async def fetch(bootstrap: str, topic: str, partitions: int, records: int, max_partition_bytes: int = 1 << 20) -> float:
    """Fetch back the `records` produce() spread evenly over the partitions, each partition on a
    connection of its own from offset 0, each request from where the last answer ended; wall
    seconds. Every record must come back."""
    per_partition = records // partitions
    decode = _decoder(ApiKey.FETCH, FETCH_VERSION)
    counted = [0] * partitions

    def reader(p: int) -> tuple[Callable[[], tuple[int, bytes] | None], Callable[[int, bytes], None]]:
        template = encode_request(ApiKey.FETCH, FETCH_VERSION, {
            "cluster_id": None, "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": _SENTINEL, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": max_partition_bytes}]}]}, client_id=CLIENT_ID)
        position = bytes(template).index(struct.pack(">q", _SENTINEL))
        frame, cursor, asked, empty = _correlated(template), [0], [False], [0]

        def take() -> tuple[int, bytes] | None:
            if cursor[0] >= per_partition or asked[0]:
                return None
            asked[0] = True
            struct.pack_into(">q", template, position, cursor[0])
            return cursor[0], frame(cursor[0])

        def answered(offset: int, payload: bytes) -> None:
            asked[0] = False
            before = cursor[0]
            response = decode(payload)
            if response.error_code != ErrorCode.none:
                raise RuntimeError(f"Fetch of partition {p} at {offset}: {ErrorCode(response.error_code).name}")
            for topic_response in response.responses:
                for part in topic_response.partitions:
                    if part.error_code != ErrorCode.none:
                        raise RuntimeError(f"Fetch of partition {p} at {offset}: {ErrorCode(part.error_code).name}")
                    for base, last in _batch_spans(part.records or b""):
                        if last >= cursor[0]:
                            counted[p] += last + 1 - max(base, cursor[0])
                            cursor[0] = last + 1
            empty[0] = 0 if cursor[0] > before else empty[0] + 1
            if empty[0] >= _EMPTY_ANSWERS:  # each waited max_wait (500 ms) for records that are not there
                raise RuntimeError(f"partition {p} answered no record past offset {cursor[0]:,} "
                                   f"({_EMPTY_ANSWERS} fetches in a row); {per_partition:,} were produced")
        return take, answered

    wall = await _pipelined(bootstrap, [reader(p) for p in range(partitions)], 1)
    if counted != [per_partition] * partitions:
        raise RuntimeError(f"fetched {counted} records back per partition, not {per_partition:,} each")
    return wall


def produce_fetch_rates(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int,
                        server: set[int], batch_records: int = 100) -> dict[str, float]:
    """Records/s produced (acks=all) and then fetched back by the light client, with both sides'
    cores busy (the same figures as kcat.produce_fetch_rates)."""
    import resource

    from loadtest.bench import pinning
    from loadtest.bench.clients import _client_cpu, create_topic

    records -= records % (partitions * batch_records)  # what produce() sends: whole requests
    create_topic(bootstrap, topic, partitions)
    out: dict[str, float] = {}
    for phase, work in (("produce", lambda: produce(bootstrap, topic, partitions, records, batch_records, value_bytes)),
                        ("fetch", lambda: fetch(bootstrap, topic, partitions, records))):
        server_before = pinning.cpu_seconds(server)
        before = resource.getrusage(resource.RUSAGE_SELF)
        wall = asyncio.run(work())
        after = resource.getrusage(resource.RUSAGE_SELF)
        server_cpu = pinning.spent(server_before, pinning.cpu_seconds(server))
        client_cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        out[f"{phase}_rps"] = records / wall
        out.update(_client_cpu(phase, records, client_cpu, wall))
        out[f"{phase}_server_cores"] = server_cpu / wall
        out[f"{phase}_per_server_core"] = records / server_cpu if server_cpu > 0 else 0.0
    return out
