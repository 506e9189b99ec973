"""Record types of the group coordinator shard (`__consumer_offsets`).

Filled in by the classic-group and share-group membership work; the codec refuses any record
type it does not know, so a log is never half-replayed.
"""

from __future__ import annotations

from coordinator.codec import RecordCodec

CODEC = RecordCodec("group-coordinator")
