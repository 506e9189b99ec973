"""The cluster's topic metadata as the group coordinator shard sees it, and the group metadata hash.

Kafka's coordinator keeps a CoordinatorMetadataImage (set by onMetadataUpdate, not a record) and
stores in ShareGroupMetadata a hash of the subscribed topics' metadata (ModernGroup.computeMetadataHash:
per topic a hash of its id, name and partitions, combined in topic-name order; 0 when no subscribed
topic exists). A change of the hash (a topic created, deleted or given more partitions) bumps the
group epoch on the next heartbeat. Kafka uses XXH3 and includes the partitions' racks; we have no
racks and use BLAKE2b: the value only has to be stable and change when the metadata does.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.share.messages import TopicImage


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    by_id: Mapping[UUID, TopicImage] = field(default_factory=dict)
    # metadata_hash's answers for this image (it is immutable, so they never go stale): a consumer
    # group member's every heartbeat asks for its group's hash, which changes only with the image
    # or the subscriptions (Kafka recomputes it only then, at its metadata refresh).
    hashes: dict[frozenset[str], int] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def of(topics: Iterable[TopicImage]) -> "TopicsImage":
        topics = tuple(topics)
        return TopicsImage({t.name: t for t in topics}, {t.topic_id: t for t in topics})

    def is_empty(self) -> bool:
        return not self.by_name

    def topic_ids(self, names: Iterable[str]) -> frozenset[UUID]:
        """Kafka's TopicIds: the ids of the named topics that exist."""
        return frozenset(self.by_name[n].topic_id for n in names if n in self.by_name)


EMPTY_IMAGE = TopicsImage()


def _signed64(digest: bytes) -> int:
    return struct.unpack(">q", digest)[0]


def topic_hash(topic: TopicImage) -> int:
    h = hashlib.blake2b(digest_size=8)
    h.update(b"\x00")  # format version, as Kafka's TOPIC_HASH_MAGIC_BYTE
    h.update(topic.topic_id.bytes)
    h.update(topic.name.encode())
    h.update(struct.pack(">i", topic.partitions))
    return _signed64(h.digest())


def metadata_hash(subscribed_topic_names: Iterable[str], image: TopicsImage) -> int:
    """Kafka's ModernGroup.computeMetadataHash over the subscribed topics that exist."""
    names = frozenset(subscribed_topic_names)
    known = image.hashes.get(names)
    if known is None:
        known = image.hashes[names] = _metadata_hash(names, image)
        if len(image.hashes) > 4096:  # groups of many different subscriptions: keep it bounded
            image.hashes.clear()
    return known


def _metadata_hash(subscribed_topic_names: frozenset[str], image: TopicsImage) -> int:
    topics = sorted((image.by_name[n] for n in subscribed_topic_names if n in image.by_name), key=lambda t: t.name)
    if not topics:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for topic in topics:
        h.update(struct.pack(">q", topic_hash(topic)))
    return _signed64(h.digest())
