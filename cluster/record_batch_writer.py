"""Record batches of coordinator logs, written directly (issue 12): the runtime's appends and
compaction's rewrites (cluster/recordbatch.encode_records).

Such a batch has the same shape every time: uncompressed, no producer, every record at the batch's
timestamp (delta 0) and without headers. kio's generic writer took a temporary buffer and a datetime
per record, then the exact timestamp was stamped and the batch sealed again: 22 us for one record
and 139 us for 20 here (load 30), 7-20 us of a group coordinator's CPU per OffsetCommit. This writes
the same bytes (a differential test holds it to the kio-based encoder) in 1.2 and 22 us.

Layout (Kafka's RecordBatch v2): baseOffset, batchLength (everything after it), partitionLeaderEpoch,
magic, CRC-32C (attributes to the end), attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
producerId, producerEpoch, baseSequence, record count; then per record: its length, attributes,
timestampDelta, offsetDelta, key and value (length -1: null), header count, as zigzag varints.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from cluster.entity_writer import uvarint

_HEAD = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, CRC
_SEALED = struct.Struct(">hiqqqhii")  # attributes .. record count: the CRC covers these onwards
_HEAD_AFTER_LENGTH = 9  # leader epoch, magic and CRC: counted in batchLength, not covered by the CRC
_NULL = b"\x01"  # zigzag varint of -1
_RECORD_START = b"\x00\x00"  # attributes 0, timestamp delta 0
_NO_HEADERS = b"\x00"
_SMALL = [bytes([n << 1]) for n in range(64)]  # zigzag varints of 0..63: one byte


def _varint(n: int) -> bytes:
    """Kafka's signed varint: zigzag, then 7 bits a byte."""
    return _SMALL[n] if 0 <= n < 64 else uvarint((n << 1) ^ (n >> 63))


def _field(data: bytes | None) -> bytes:
    return _NULL if data is None else _varint(len(data)) + data


def write_batch(entries: Sequence[tuple[int, bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One batch of (offset, key, value) records, every record at `timestamp_ms`."""
    if not entries:
        raise ValueError("a record batch needs at least one record")
    base = entries[0][0]
    parts = [_SEALED.pack(0, entries[-1][0] - base, timestamp_ms, timestamp_ms, -1, -1, -1, len(entries))]
    append = parts.append
    for offset, key, value in entries:
        record = b"".join((_RECORD_START, _varint(offset - base), _field(key), _field(value), _NO_HEADERS))
        append(_varint(len(record)))
        append(record)
    sealed = b"".join(parts)
    return _HEAD.pack(base, len(sealed) + _HEAD_AFTER_LENGTH, 0, 2, crc32c.crc32c(sealed)) + sealed
