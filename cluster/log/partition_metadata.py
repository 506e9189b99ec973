"""Which topic a log directory belongs to: `partition.metadata`, Kafka's file (KIP-516).

A replicated partition's log is named by topic and partition, as every log here is; a topic
deleted while one of its replicas was away (its node down) leaves that replica's directory
behind, and a topic created again under the name would find it. Kafka keys logs by topic id for
this; here the replica host writes the topic id beside the segments when it opens a log, and a
directory holding another topic's id is a stray copy to remove, never records to serve.

Text, as Kafka's: `version: 0` and `topic_id: <id>` lines (the id as a UUID's usual text),
written whole or not at all (LogFiles.replace_file).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from cluster.log.files import FileOps, LogFiles

PARTITION_METADATA_NAME = "partition.metadata"
TMP_NAME = PARTITION_METADATA_NAME + ".tmp"


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id written in `directory`, or None (no file yet: a new log, or one from before)."""
    try:
        text = (Path(directory) / PARTITION_METADATA_NAME).read_text()
    except FileNotFoundError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return uuid.UUID(fields["topic_id"].strip())
    except (KeyError, ValueError):
        return None  # unreadable: written again by the host that opens the log


def write_topic_id(directory: Path, topic_id: uuid.UUID) -> None:
    LogFiles(Path(directory), FileOps()).replace_file(
        PARTITION_METADATA_NAME, f"version: 0\ntopic_id: {topic_id}\n".encode(), TMP_NAME
    )
