"""Kafka RecordBatch v2 framing: the unit every partition log stores.

User-topic partitions keep the producers' batches byte for byte (only the base offset and the
partition leader epoch are patched, and neither is covered by the batch CRC), so Fetch serves
stored bytes without re-encoding. Coordinator partitions store their msgpack records as the
key/value of records inside batches of the same format (cluster/record_batch_writer.py),
so one framing, one checksum (CRC-32C) and one recovery path serve every log.

Layout of the 61-byte batch header (Kafka's DefaultRecordBatch):
    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32
batchLength counts everything after itself; the CRC covers attributes to the end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cramjam
import crc32c
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode
from kio.serial.errors import SerialError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from cluster.record_batch_writer import write_batch

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede what batchLength counts
CRC_START = 21  # attributes: first byte the CRC covers
# The smallest v2 record: length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each (Kafka's DefaultRecord).
MIN_RECORD_SIZE = 7
MAGIC = 2
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
# Kafka inflates a produced batch whatever its size; here a few KiB of zeros would inflate to
# gigabytes on the leader, so one batch's records may take at most this much decompressed. Far
# above any batch a client builds under message.max.bytes (1 MiB by default) at real ratios.
MAX_DECOMPRESSED_BYTES = 128 << 20
# First output buffer per compressed byte; doubled up to the cap when the records need more, so an
# ordinary batch costs one small buffer and a bomb at most a series ending at the cap.
_FIRST_RATIO = 8
_MIN_BUFFER = 1 << 20
# Java clients frame snappy the xerial way: this magic, version and compat ints, then
# length-prefixed raw snappy blocks; librdkafka writes one raw snappy block. Kafka reads both.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_BLOCK_LENGTH = struct.Struct(">i")


class BatchError(ValueError):
    """A batch that cannot be accepted; carries the Kafka error code a producer gets."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, framing included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(base_offset, total size) of the batch at pos, or None if fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    base_offset, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base_offset, LOG_OVERHEAD + batch_length


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at pos; raises BatchError when it is short or not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise BatchError(ErrorCode.corrupt_message, "record batch shorter than its 61-byte header")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise BatchError(
            ErrorCode.unsupported_for_message_format,
            f"record batch magic {header.magic}; only magic 2 (Kafka 0.11+) is accepted",
        )
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise BatchError(ErrorCode.corrupt_message, f"record batch length {header.batch_length} too small")
    return header


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    return crc32c.crc32c(view) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in buf, in order; stops at a partial tail."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def split_produced(records: bytes) -> list[bytearray]:
    """Validate the batches of one partition of a Produce request and return them, mutable."""
    return [batch for batch, _ in check_produced(records)]


def check_produced(records: bytes) -> list[tuple[bytearray, BatchHeader]]:
    """Validate the batches of one partition of a Produce request: each, mutable, with its header.

    What Kafka's LogValidator rejects for a non-transactional producer: a truncated batch, a
    bad CRC, an old magic, an empty batch, a control batch, and an idempotent batch (one with a
    producer id) without a sequence number. Sequences and epochs are checked by the partition's
    producer state (cluster/producer_state.py), in its serial append path.
    """
    if not records:
        raise BatchError(ErrorCode.corrupt_message, "empty record set")
    view = memoryview(records)
    batches: list[tuple[bytearray, BatchHeader]] = []
    pos = 0
    while pos < len(view):
        header = parse_header(view, pos)
        size = LOG_OVERHEAD + header.batch_length
        if pos + size > len(view):
            raise BatchError(ErrorCode.corrupt_message, "record batch truncated")
        if crc32c.crc32c(view[pos + CRC_START : pos + size]) != header.crc:
            raise BatchError(ErrorCode.corrupt_message, "record batch CRC-32C mismatch")
        if header.record_count <= 0 or header.last_offset_delta < 0:
            raise BatchError(ErrorCode.invalid_record, "record batch holds no records")
        compression = header.attributes & COMPRESSION_MASK
        if not compression and header.record_count > (size - HEADER_SIZE) // MIN_RECORD_SIZE:
            # Kafka reads every record and finds the batch ends early; here the count alone would
            # make that many offsets, each tracked on its own once a share partition splits the batch.
            raise BatchError(
                ErrorCode.invalid_record,
                f"record batch of {size} bytes cannot hold the {header.record_count} records it declares",
            )
        if header.last_offset_delta + 1 != header.record_count:
            # Kafka's LogValidator.validateBatch: else one batch moves the log end by up to 2^31.
            raise BatchError(
                ErrorCode.invalid_record,
                f"inconsistent batch offset range [0, {header.last_offset_delta}] and count of records {header.record_count}",
            )
        if header.attributes & CONTROL_FLAG:
            raise BatchError(ErrorCode.invalid_record, "producers may not write control batches")
        if header.attributes & TRANSACTIONAL_FLAG:
            raise BatchError(
                ErrorCode.invalid_request, "transactional producers are not supported (SPEC.md §11)"
            )
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise BatchError(
                ErrorCode.invalid_record,
                f"invalid sequence number {header.base_sequence} in record batch with producer id {header.producer_id}",
            )
        if compression:
            # Kafka's LogValidator reads every record of a compressed batch: its count is a claim
            # until the records back it (the uncompressed count is bounded by the bytes above).
            records_view = decompress(compression, view[pos + HEADER_SIZE : pos + size])
            _walk_records(records_view, 0, header.record_count, ErrorCode.invalid_record)
        batches.append((bytearray(view[pos : pos + size]), header))
        pos += size
    return batches


def assign_offset(batch: bytearray, base_offset: int, leader_epoch: int) -> None:
    """Stamp the log's offset and the leader epoch; neither field is under the CRC."""
    _BASE_OFFSET.pack_into(batch, 0, base_offset)
    _EPOCH.pack_into(batch, LOG_OVERHEAD, leader_epoch)


# -- coordinator records: (key, value) pairs inside uncompressed batches ------------------------


def encode_records(entries: Sequence[tuple[int, bytes | None, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed batch of (offset, key, value) records, every record at `timestamp_ms`.

    Fresh coordinator batches number their records 0..n-1 (the log patches the base offset on
    append); compaction keeps the surviving records' offsets, gaps and all, as Kafka's cleaner does.
    """
    return write_batch(entries, timestamp_ms)  # written directly: cluster/record_batch_writer.py says why


def decode_records(batch: bytes | bytearray | memoryview) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of each record of an uncompressed batch (coordinator logs)."""
    parsed, _ = read_batch(bytes(batch), 0)  # kio wants a read-only buffer
    return [(int(r.offset), r.key, r.value) for r in parsed.records]


def record_timestamps(batch: bytes | bytearray | memoryview) -> list[tuple[int, int]] | None:
    """(offset, timestamp ms) of each record, or None for a compressed batch; BatchError
    (CORRUPT_MESSAGE) when the records do not fit the batch.

    Used by ListOffsets to find the first record at or after a timestamp inside a batch; kio's
    record reader rounds timestamps to seconds, so only the varints it provides are reused here.
    The produce path checks only the header (walking every record there would cost each produce),
    so the record count and lengths are a client's: each record must be at least one byte and end
    inside the batch, and no batch holds more records than it has bytes.
    """
    header = parse_header(batch, 0)
    if header.compression:
        return None
    view = memoryview(batch)[: header.size]
    deltas = _walk_records(view, HEADER_SIZE, header.record_count, ErrorCode.corrupt_message)
    return [(header.base_offset + o, header.base_timestamp + t) for o, t in deltas]


def _walk_records(view: memoryview, pos: int, count: int, error: ErrorCode) -> list[tuple[int, int]]:
    """(offset delta, timestamp delta) of the `count` records from pos to the end of view; each
    must be at least one byte, hold its fields and end inside view, and they must fill it exactly.
    The loop is capped by the bytes, never by the client's count."""
    end = len(view)
    out: list[tuple[int, int]] = []
    start = pos
    try:
        for _ in range(min(count, end - pos)):
            length, n = read_signed_varint(view, pos)
            body = pos + n
            if length < 1 or body + length > end:
                raise BatchError(error, f"record of length {length} at byte {pos} of {end} record bytes")
            ts_delta, m = read_signed_varlong(view, body + 1)  # skip the attributes byte
            offset_delta, k = read_signed_varint(view, body + 1 + m)
            if 1 + m + k > length:
                raise BatchError(error, f"record at byte {pos} is shorter than its fields")
            out.append((offset_delta, ts_delta))
            pos = body + length
    except BatchError:
        raise
    except (SerialError, ValueError) as exc:  # a varint cut short or too long
        raise BatchError(error, f"record at byte {pos}: {exc}") from exc
    if len(out) != count or pos != end:
        raise BatchError(error, f"batch says {count} records; {len(out)} fill {pos - start} of its {end - start} record bytes")
    return out


# -- compressed record sets ----------------------------------------------------------------


def decompress(codec: int, data: memoryview) -> memoryview:
    """The records of a compressed batch, at most MAX_DECOMPRESSED_BYTES of them; CORRUPT_MESSAGE
    when the data does not decompress, INVALID_RECORD when it inflates beyond the cap."""
    try:
        if codec == SNAPPY:
            return _snappy(data)
        if codec in (GZIP, LZ4, ZSTD):
            module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}[codec]
            return _bounded(module.decompress_into, data)
    except cramjam.DecompressionError as exc:
        raise BatchError(ErrorCode.corrupt_message, f"records do not decompress (codec {codec}): {exc}") from exc
    raise BatchError(ErrorCode.corrupt_message, f"unknown compression codec {codec}")


def _too_large() -> BatchError:
    return BatchError(ErrorCode.invalid_record, f"records decompress beyond {MAX_DECOMPRESSED_BYTES} bytes")


def _bounded(decompress_into, data: memoryview) -> memoryview:
    """Stream codecs write into a fixed buffer and fail when it is full (cramjam's io::copy into
    it), so nothing larger than the buffer is ever allocated; a full buffer is retried doubled."""
    size = min(max(_MIN_BUFFER, len(data) * _FIRST_RATIO), MAX_DECOMPRESSED_BYTES)
    while True:
        out = bytearray(size + 1)  # one spare byte: filling it means the data may go on
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            n = size + 1
        if n <= size:
            return memoryview(out)[:n].toreadonly()  # kio reads read-only buffers only
        if size >= MAX_DECOMPRESSED_BYTES:
            raise _too_large()
        size = min(size * 2, MAX_DECOMPRESSED_BYTES)


def _snappy(data: memoryview) -> memoryview:
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _snappy_block(data, MAX_DECOMPRESSED_BYTES)
    out = bytearray()
    pos = _XERIAL_HEADER
    while pos < len(data):
        if len(data) - pos < _BLOCK_LENGTH.size:
            raise BatchError(ErrorCode.corrupt_message, "xerial snappy block length cut short")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or pos + length > len(data):
            raise BatchError(ErrorCode.corrupt_message, f"xerial snappy block of {length} bytes past the data")
        out += _snappy_block(data[pos : pos + length], MAX_DECOMPRESSED_BYTES - len(out))
        pos += length
    return memoryview(out).toreadonly()


def _snappy_block(block: memoryview, room: int) -> memoryview:
    # A raw snappy block starts with its decompressed length: checked before anything is allocated.
    declared = cramjam.snappy.decompress_raw_len(block)
    if declared > room:
        raise _too_large()
    out = bytearray(declared)
    n = cramjam.snappy.decompress_raw_into(block, out)
    if n != declared:
        raise BatchError(ErrorCode.corrupt_message, f"snappy block declares {declared} bytes, holds {n}")
    return memoryview(out).toreadonly()
