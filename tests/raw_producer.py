"""An idempotent producer by hand, on kio: InitProducerId, batches carrying a producer id, epoch
and base sequence, Produce, and the stored batch headers read back with Fetch. For the cases a
real client never shows on purpose: retries, gaps, old epochs."""

from __future__ import annotations

import struct

import crc32c
from kio.schema.errors import ErrorCode

from cluster.gateway.apis import ApiKey
from cluster.recordbatch import CRC_START, BatchHeader, encode_records, iter_batches
from tests.kio_client import KioClient

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_PRODUCER_FIELDS_AT = 43
_CRC = struct.Struct(">I")
_CRC_AT = 17


def producer_batch(producer_id: int, epoch: int, base_sequence: int, count: int = 1, tag: str = "v") -> bytes:
    """One uncompressed batch of `count` records, sealed with a valid CRC."""
    values = [(i, f"{tag}-k{i}".encode(), f"{tag}-{producer_id}-{epoch}-{base_sequence + i}".encode()) for i in range(count)]
    batch = bytearray(encode_records(values, 1_700_000_000_000))
    _PRODUCER_FIELDS.pack_into(batch, _PRODUCER_FIELDS_AT, producer_id, epoch, base_sequence)
    _CRC.pack_into(batch, _CRC_AT, crc32c.crc32c(batch[CRC_START:]))
    return bytes(batch)


def init_producer_id(client: KioClient, version: int = 4, **fields) -> tuple[ErrorCode, int, int]:
    """(error, producer id, epoch) for a non-transactional producer unless fields say otherwise."""
    body = {"transactional_id": None, "transaction_timeout": 60_000, **fields}
    response = client.call(ApiKey.INIT_PRODUCER_ID, version, body)
    return response.error_code, response.producer_id, response.producer_epoch


def produce(client: KioClient, topic: str, partition: int, batch: bytes) -> tuple[ErrorCode, int]:
    """(error, base offset) of one Produce v9 request, acks=-1, carrying batch."""
    body = {"acks": -1, "timeout": 5000, "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}
    part = client.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def stored_batches(client: KioClient, topic: str, partition: int) -> list[BatchHeader]:
    """Headers of every batch stored in the partition, read with Fetch."""
    body = {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 26,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 26}]}],
    }
    headers: list[BatchHeader] = []
    while True:
        part = client.call(ApiKey.FETCH, 12, body).responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        batch_headers = [h for _, h in iter_batches(part.records or b"")]
        headers += batch_headers
        if not batch_headers or headers[-1].last_offset + 1 >= part.high_watermark:
            return headers
        body["topics"][0]["partitions"][0]["fetch_offset"] = headers[-1].last_offset + 1
