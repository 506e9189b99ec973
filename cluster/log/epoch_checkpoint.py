"""The leader-epoch checkpoint: (leader epoch, start offset) pairs kept beside a log's segments.

Kafka's `leader-epoch-checkpoint` (LeaderEpochCheckpointFile): a replicated log's epoch history
must outlive its batches. Compaction drops batches whose records were all superseded and may
start a kept batch at its first surviving record, so the epochs the batch headers show after a
compaction can begin later than they did, or not at all; a follower asking where an epoch ended
would then be told wrong, and keep a tail it should cut. The replica writes this file whenever its
history changes (a new epoch, a truncation), before it appends under a new epoch as leader.

Text, as Kafka's: a version line, a count line, then one "epoch start_offset" line per entry;
written to a temporary file, fsynced and renamed over the old one, so a crash leaves one or the
other whole. What the file does not know (epochs of batches appended after its last write) the
replica reads back from the batch headers on open.
"""

from __future__ import annotations

import logging

from cluster.log.files import LogFiles

log = logging.getLogger(__name__)

EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
TMP_NAME = EPOCH_CHECKPOINT_NAME + ".tmp"
_VERSION = 0


def read_epoch_checkpoint(files: LogFiles) -> list[tuple[int, int]] | None:
    """The entries, or None when there is no file or it cannot be parsed (then the headers decide)."""
    try:
        text = (files.directory / EPOCH_CHECKPOINT_NAME).read_text()
    except FileNotFoundError:
        return None
    try:
        lines = text.splitlines()
        if int(lines[0]) != _VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("version or count")
        entries = [(int(epoch), int(start)) for epoch, start in (line.split() for line in lines[2:])]
    except (ValueError, IndexError) as exc:
        log.warning("%s: ignoring an unreadable leader-epoch checkpoint (%s)", files.directory, exc)
        return None
    return entries


def write_epoch_checkpoint(files: LogFiles, entries: list[tuple[int, int]]) -> None:
    body = "\n".join([str(_VERSION), str(len(entries)), *(f"{e} {s}" for e, s in entries)]) + "\n"
    files.replace_file(EPOCH_CHECKPOINT_NAME, body.encode(), TMP_NAME)
