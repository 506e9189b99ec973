"""The on-disk layout of a log directory: file names and the segment file header (docs/log-format.md).

The entries after the header are Kafka RecordBatch v2 (cluster/recordbatch.py); the recovery point
file has its own module, checkpoint.py.
"""

from __future__ import annotations

import struct

FILE_MAGIC = b"RGLOG\x00\x00\x00"
# Every segment header and recovery point carries it; a build reads every version up to its own.
FORMAT_VERSION = 1
FILE_HEADER = struct.Struct(">8sII")  # magic, format version, reserved
FILE_HEADER_SIZE = FILE_HEADER.size  # 16

SEGMENT_SUFFIX = ".log"
CLEANED_SUFFIX = ".cleaned"  # a compaction's output before its rename over the first closed segment
TMP_SUFFIX = ".tmp"


def segment_name(base_offset: int) -> str:
    """Kafka's naming, zero-padded to 20 digits so names sort by offset."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_base_offset(name: str) -> int | None:
    """The base offset a segment file name stands for, or None for any other file."""
    stem = name[: -len(SEGMENT_SUFFIX)]
    return int(stem) if name.endswith(SEGMENT_SUFFIX) and stem.isdigit() else None


def file_header() -> bytes:
    return FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION, 0)
