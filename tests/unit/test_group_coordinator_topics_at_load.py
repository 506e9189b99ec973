"""A group coordinator's shards know the cluster's topics from the moment they are made, as Kafka's
shards have the metadata image at onLoaded (cluster/actors/group_coordinator.py)."""

from __future__ import annotations

import asyncio
import uuid

from cluster.actors.group_coordinator import GroupCoordinatorActor
from cluster.config import Config
from cluster.leadership import empty_leadership
from cluster.metadata import TopicInfo


def test_a_shard_made_for_a_load_starts_with_the_topics_of_the_last_map(tmp_path):
    # The bug this guards: the operations queued while a partition loaded ran before the load's
    # update_topics, against an empty image; a consumer group's metadata hash then changed (to 0),
    # its epoch was bumped and every member's target emptied, and the next heartbeat gave
    # everything back (demo run ci32: ledger-0, epochs 11 and 12 within 40 ms).
    async def main() -> None:
        actor = GroupCoordinatorActor.__ray_actor_class__("gc-0", Config({}), str(tmp_path))
        try:
            before = actor.host.runtime.shard_factory(("__consumer_offsets", 0), None)
            assert before.topics_image.by_name == {}
            pushed = empty_leadership()
            pushed.version = 1
            orders = TopicInfo("orders", uuid.uuid4(), 12, False, {})
            pushed.topics = {"orders": orders}
            pushed.topics_by_id = {orders.topic_id: orders}
            await actor.update_leadership(pushed)
            shard = actor.host.runtime.shard_factory(("__consumer_offsets", 1), None)
            assert shard.topics_image.by_name["orders"].topic_id == orders.topic_id
            assert shard.topics_image.by_name["orders"].partitions == 12
        finally:
            await actor.host.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))
