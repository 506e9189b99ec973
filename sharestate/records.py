"""Record types of the share coordinator shard (`__share_group_state`)."""

from __future__ import annotations

from coordinator.codec import RecordCodec

CODEC = RecordCodec("share-coordinator")
