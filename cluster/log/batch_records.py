"""The keys and values of an uncompressed batch as memoryview slices: the replay path's reader.

kio's reader builds a record object per record (with a datetime for its timestamp) that replay
throws away; replay only needs each key and value, handed to the codec without a copy. The CRC is
not checked here: PartitionLog.batches() checks every batch open() did not (issue 12: one pass).
A batch this reader does not expect (compressed, control) goes through kio's reader as before.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.recordbatch import HEADER_SIZE, decode_records

KeyValue = tuple[memoryview | None, memoryview | None]

_NOT_PLAIN = 0x07 | 0x20  # compression codec bits, control batch


class RecordsCorrupt(ValueError):
    """The records do not fit the batch their header describes."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at pos: (value, next position)."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordsCorrupt("varint longer than 10 bytes")


def key_values(batch: bytes | bytearray | memoryview) -> list[KeyValue]:
    # Index the bytes (faster than a memoryview's items), slice the view (no copy).
    data = batch if isinstance(batch, bytes) else bytes(batch)
    view = memoryview(data)
    if data[22] & _NOT_PLAIN:  # the low byte of the big-endian attributes (bytes 21-22)
        return [(_view(k), _view(v)) for _, k, v in decode_records(data)]
    size = 12 + int.from_bytes(data[8:12], "big", signed=True)
    count = int.from_bytes(data[57:61], "big", signed=True)
    varint: Callable[[bytes, int], tuple[int, int]] = _varint
    out: list[KeyValue] = []
    append = out.append
    pos = HEADER_SIZE
    # Varints of one byte (below 64 after zigzag) are read inline: most lengths and deltas are.
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, p = varint(data, pos)
            end = p + length
            if length < 1 or end > size:
                raise RecordsCorrupt(f"record of length {length} at byte {pos} of a {size}-byte batch")
            p += 1  # the attributes byte
            while data[p] >= 0x80:  # timestamp delta
                p += 1
            p += 1
            while data[p] >= 0x80:  # offset delta
                p += 1
            b = data[p + 1]
            if b < 0x80:
                klen, p = (b >> 1) ^ -(b & 1), p + 2
            else:
                klen, p = varint(data, p + 1)
            key = None
            if klen >= 0:
                key, p = view[p : p + klen], p + klen
            b = data[p]
            if b < 0x80:
                vlen, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                vlen, p = varint(data, p)
            value = None
            if vlen >= 0:
                value, p = view[p : p + vlen], p + vlen
            if p > end:
                raise RecordsCorrupt(f"record at byte {pos} is shorter than its fields")
            append((key, value))
            pos = end
    except IndexError as exc:
        raise RecordsCorrupt(f"record at byte {pos} runs past the batch") from exc
    if pos != size:
        raise RecordsCorrupt(f"{count} records end at byte {pos} of a {size}-byte batch")
    return out


def _view(data: bytes | None) -> memoryview | None:
    return None if data is None else memoryview(data)
