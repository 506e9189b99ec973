"""The group coordinator actor hands its shards the groups' configs of the controller's Leadership
push (cluster/actors/group_coordinator.py), evaluated within the broker's bounds."""

from __future__ import annotations

import asyncio

from cluster.actors.group_coordinator import GroupCoordinatorActor
from cluster.config import Config
from cluster.leadership import empty_leadership
from coordinator.config import GroupConfig


def test_a_push_gives_every_shard_the_groups_share_session_settings(tmp_path):
    async def main() -> None:
        actor = GroupCoordinatorActor.__ray_actor_class__("gc-0", Config({}), str(tmp_path))
        try:
            shard = actor.host.runtime.shard_factory(("__consumer_offsets", 0), None)
            pushed = empty_leadership()
            pushed.version = 1
            pushed.group_configs = {"g": {"share.heartbeat.interval.ms": "8000", "share.session.timeout.ms": "90000"},
                                    "h": {"share.auto.offset.reset": "earliest"}}
            await actor.update_leadership(pushed)
            # 90 s is above group.share.max.session.timeout.ms (60 s): capped, as Kafka evaluates.
            assert shard.group_config_manager.group_config("g") == GroupConfig(60_000, 8_000)
            assert shard.group_config_manager.group_config("h") is None
            again = empty_leadership()
            again.version = 2
            await actor.update_leadership(again)  # the overrides deleted
            assert shard.group_config_manager.group_config("g") is None
        finally:
            await actor.host.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))
