"""CreateTopics, CreatePartitions and DeleteTopics whose metadata write fails (disk full) are
answered with Kafka's UNKNOWN_SERVER_ERROR per topic, which its controller gives for a failure it did
not expect (EventHandlerExceptionInfo's catch-all), instead of a closed connection, and with no
message (issue 21); the metadata is as before, and the same request succeeds once there is space
again (issue 10)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from kio.schema.errors import ErrorCode

from cluster.clients.controller import ControllerClient
from cluster.gateway.apis import ApiKey
from cluster.gateway.handlers import meta, topics
from cluster.leadership import Leadership
from cluster.log import LogConfig, PartitionLog
from cluster.metadata import CODEC, ClusterMetadata, TopicSpec
from cluster.runtime import CoordinatorRuntime, ManualWakeups, RuntimeConfig
from kernel.clock import ManualClock
from tests.full_disk import FullDisk
from tests.unit.gateway.fakes import OverRay, gateway, request

TP = ("__cluster_metadata", 0)


class LoggedController:
    """The controller's topic calls as it makes them: one metadata write on a real log over `disk`."""

    def __init__(self, tmp_path, disk: FullDisk) -> None:
        clock = ManualClock(1_000_000)
        self.rt = CoordinatorRuntime(
            codec=CODEC,
            shard_factory=ClusterMetadata,
            config=RuntimeConfig(data_dir=tmp_path, log_config=LogConfig(compacted=True, segment_bytes=4096)),
            executor=ThreadPoolExecutor(2),
            clock=clock,
            wakeups=ManualWakeups(clock),
            log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk),
        )

    def meta(self) -> ClusterMetadata:
        return self.rt.shard(TP)

    async def create_topics(self, specs, validate_only=False):
        return await self.rt.write(TP, None, lambda _t: self.meta().create_topics(specs, validate_only))

    async def delete_topics(self, names):
        return await self.rt.write(TP, None, lambda _t: self.meta().delete_topics(names))

    async def create_partitions(self, name, total, validate_only=False):
        return await self.rt.write(TP, None, lambda _t: self.meta().create_partitions(name, total, validate_only))


def _gw(controller: LoggedController):
    gw = gateway(**{"num.partitions": 1, "raygroups.max.partitions.per.topic": 100,
                    "raygroups.max.partitions": 1000, "auto.create.topics.enable": True})
    gw.controller = ControllerClient(OverRay(controller, "ControllerActor"))  # its failures come through Ray

    async def refresh():
        gw.leadership = Leadership(1, "c", [], dict(controller.meta().topics), {}, {})

    gw.router.refresh = refresh
    return gw


def _create(name: str, partitions: int):
    return request(ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 1000, "validate_only": False, "topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}]})


def _grow(name: str, count: int):
    return request(ApiKey.CREATE_PARTITIONS, 3, {"timeout_ms": 1000, "validate_only": False, "topics": [
        {"name": name, "count": count, "assignments": None}]})


def _delete(name: str):
    return request(ApiKey.DELETE_TOPICS, 5, {"timeout_ms": 1000, "topic_names": [name]})


def test_a_full_disk_answers_unknown_server_error_per_topic_and_a_retry_succeeds(tmp_path):
    async def main():
        disk = FullDisk()
        controller = LoggedController(tmp_path, disk)
        await controller.rt.load(TP, 0)
        gw = _gw(controller)
        await controller.create_topics([TopicSpec("kept", 1)])
        await gw.router.refresh()

        messages = lambda r: getattr(r, "topics", None) or getattr(r, "results", None) or r.responses  # noqa: E731
        calls = [
            (topics.create_topics, _create("new", 3), lambda r: [(t.name, t.error_code) for t in r.topics], "new"),
            (topics.create_partitions, _grow("kept", 4), lambda r: [(t.name, t.error_code) for t in r.results], "kept"),
            (topics.delete_topics, _delete("kept"), lambda r: [(t.name, t.error_code) for t in r.responses], "kept"),
        ]
        for handler, req, codes, name in calls:
            before = dict(controller.meta().topics)
            with disk.filled():
                response = await handler(gw, req)
            assert codes(response) == [(name, ErrorCode.unknown_server_error)]
            assert [t.error_message for t in messages(response)] == [None]
            assert controller.meta().topics == before
            assert codes(await handler(gw, req)) == [(name, ErrorCode.none)]

        # Metadata's auto-creation: the topic stays unknown while the disk is full, then is created.
        body = {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False}
        with disk.filled():
            response = await meta.metadata(gw, request(ApiKey.METADATA, 12, body))
        assert [t.error_code for t in response.topics] == [ErrorCode.unknown_topic_or_partition]
        response = await meta.metadata(gw, request(ApiKey.METADATA, 12, body))
        assert "auto" in controller.meta().topics
        await controller.rt.close()

    asyncio.run(main())
