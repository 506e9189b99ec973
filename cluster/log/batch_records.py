"""The keys and values of an uncompressed batch, as bytes: the replay path's reader.

Replay needs only each record's key and value (no record objects, no datetimes). Where aiokafka's
compiled record reader is installed (a Cython DefaultRecordBatch; issue 12: 8x the pure-Python
reader, which was half of replay's profile) it reads them; elsewhere the Python reader below does,
with the same results (tests/unit/test_batch_records.py). The CRC is not checked here:
PartitionLog.batches() checks every batch open() did not (one pass). A batch neither reader
expects (compressed, control) goes through kio's reader as before.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.recordbatch import HEADER_SIZE, decode_records

KeyValue = tuple[bytes | None, bytes | None]
Reader = Callable[[bytes], list[KeyValue]]

_NOT_PLAIN = 0x07 | 0x20  # compression codec bits, control batch


class RecordsCorrupt(ValueError):
    """The records do not fit the batch their header describes."""


def key_values(batch: bytes | bytearray | memoryview) -> list[KeyValue]:
    data = batch if isinstance(batch, bytes) else bytes(batch)
    if data[22] & _NOT_PLAIN:  # the low byte of the big-endian attributes (bytes 21-22)
        return [(k, v) for _, k, v in decode_records(data)]
    return (_plain or _choose())(data)


def reader() -> Callable[[bytes | bytearray | memoryview], list[KeyValue]]:
    """key_values, with its plain-batch reader chosen now (the runtime's LogDisk asks when built, so
    that the first load does not pay aiokafka's import)."""
    if _plain is None:
        _choose()
    return key_values


def compiled_key_values(data: bytes) -> list[KeyValue]:
    """A plain batch's records through aiokafka's compiled reader (only where compiled_reader() found it)."""
    if _Compiled is None:
        _choose()
    try:
        return [(r.key, r.value) for r in _Compiled(data)]
    except _COMPILED_ERRORS as exc:
        raise RecordsCorrupt(f"records do not fit their batch: {exc}") from exc


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


def python_key_values(data: bytes) -> list[KeyValue]:
    """A plain batch's records in Python: the reader where no compiled one is installed."""
    size = 12 + int.from_bytes(data[8:12], "big", signed=True)
    count = int.from_bytes(data[57:61], "big", signed=True)
    varint: Callable[[bytes, int], tuple[int, int]] = _varint
    out: list[KeyValue] = []
    append = out.append
    pos = HEADER_SIZE
    # Varints of one or two bytes are read inline: every delta and length of a coordinator record is.
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length, p = (raw >> 1) ^ -(raw & 1), pos + 2
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
            p += 1
            b = data[p]
            if b < 0x80:
                klen, p = (b >> 1) ^ -(b & 1), p + 1
            elif data[p + 1] < 0x80:
                raw = (b & 0x7F) | (data[p + 1] << 7)
                klen, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                klen, p = varint(data, p)
            key = None
            if klen >= 0:
                key, p = data[p : p + klen], p + klen
            b = data[p]
            if b < 0x80:
                vlen, p = (b >> 1) ^ -(b & 1), p + 1
            elif data[p + 1] < 0x80:
                raw = (b & 0x7F) | (data[p + 1] << 7)
                vlen, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                vlen, p = varint(data, p)
            value = None
            if vlen >= 0:
                value, p = data[p : p + vlen], p + vlen
            if p > end:
                raise RecordsCorrupt(f"record at byte {pos} is shorter than its fields")
            append((key, value))
            pos = end
    except IndexError as exc:
        raise RecordsCorrupt(f"record at byte {pos} runs past the batch") from exc
    if pos != size:
        raise RecordsCorrupt(f"{count} records end at byte {pos} of a {size}-byte batch")
    return out


def compiled_reader() -> type | None:
    """aiokafka's compiled DefaultRecordBatch, or None where it is not installed or not compiled.

    Imported straight from its extension module: aiokafka's own selection would hand back its
    pure-Python reader (slower than ours) where the extension is missing or disabled.
    """
    try:
        from aiokafka.record._crecords.default_records import DefaultRecordBatch
    except ImportError:
        return None
    return DefaultRecordBatch


def _compiled_errors() -> tuple[type[BaseException], ...]:
    try:
        from aiokafka.errors import KafkaError
    except ImportError:
        return (ValueError,)
    return (KafkaError, ValueError, IndexError)


# Chosen by reader() or the first replay rather than at import: importing aiokafka takes 0.05-0.2 s,
# which every process importing the runtime (the CLI too) would pay.
_plain: Reader | None = None
_Compiled: type | None = None
_COMPILED_ERRORS: tuple[type[BaseException], ...] = ()


def _choose() -> Reader:
    global _plain, _Compiled, _COMPILED_ERRORS
    _Compiled, _COMPILED_ERRORS = compiled_reader(), _compiled_errors()
    _plain = compiled_key_values if _Compiled is not None else python_key_values
    return _plain
