"""No error message a client gets carries a server's internals (issue 21): every failure path of
the admin APIs (CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs,
DescribeConfigs, DeleteGroups, OffsetDelete, Alter/Delete/DescribeShareGroupOffsets,
ShareGroupDescribe, AlterUserScramCredentials) and Produce's full disk is provoked, and no string in
the answer holds a traceback, a path, a pid, an address, an actor id or an OS error.

Kafka sends no message for UNKNOWN_SERVER_ERROR ("to ensure we don't leak sensitive information",
ApiError.fromThrowable), none for the coordinator errors its runtime throws with their default text
(CoordinatorOperationExceptionHelper.handleOperationException answers null for those it rewrites),
and none for a forwarded request whose controller did not answer (ForwardingManager's onTimeout:
REQUEST_TIMED_OUT from a TimeoutException without one). The failures come as they do in the
cluster: a controller's exception through Ray (RayTaskError, whose text is the actor's traceback
with its process title, pid, node address and actor id), a dead or unreachable controller, the
real controller and runtimes over a full disk, a coordinator that answers a storage failure, moves
or has no leader, and the share coordinator behind the real persister doing the same."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from ray.core.generated.common_pb2 import ActorDiedErrorContext
from ray.exceptions import ActorDiedError, ActorUnavailableError

from cluster.calls import Failed
from cluster.clients.controller import ControllerClient
from cluster.clients.coordinator import CoordinatorClient
from cluster.services.group_service import GroupCoordinatorService
from cluster.clients.partition_leader import PartitionLeaderClient
from cluster.config import Config
from cluster.gateway.apis import ApiKey
from cluster.gateway.auth.credentials import CredentialStore, path_in
from cluster.gateway.auth.scram import make_credential
from cluster.gateway.auth.session import Session
from cluster.gateway.handlers import configs, group_offsets_admin, groups, produce, scram_credentials, share_groups, topics
from cluster.leadership import GatewayAddress, Leadership
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicInfo
from cluster.clients.persister import Persister
from cluster.clients.routing import NoLeader
from cluster.runtime import StorageError
from tests.unit.gateway.fakes import CONTROLLER_ACTOR_ID, OverRay, gateway, ray_task_error, request
from tests.unit.share.context import BAR, FOO, ShareContext, topic

# What must never reach a client: a traceback and its ANSI colours, a file path, a pid, an IP
# address, a Ray actor id or process title, an exception's class, an OS error.
LEAK = re.compile(
    r"Traceback|File \"|line \d+, in|\x1b\[|/[\w.-]+/|\bpid\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|actor_id|"
    r"\b[0-9a-f]{24,}\b|ray::|\bRay\w*|\w+(?:Error|Exception)\b:|Errno|ENOSPC|No space left",
)

STORAGE_TEXT = (
    "log /srv/raygroups-data/__consumer_offsets-7 failed earlier and must be reopened: "
    "append to 00000000000000000000.log failed: ENOSPC No space left on device"
)
GROUP = 32  # ConfigResource.Type.GROUP


def strings(value: Any) -> list[str]:
    """Every string in a response entity, at any depth."""
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value):
        return [s for f in dataclasses.fields(value) for s in strings(getattr(value, f.name))]
    if isinstance(value, (tuple, list)):
        return [s for v in value for s in strings(v)]
    return []


def error_messages(value: Any) -> list[str | None]:
    """Every error_message field of a response entity, at any depth."""
    if dataclasses.is_dataclass(value):
        own = [value.error_message] if hasattr(value, "error_message") else []
        return own + [m for f in dataclasses.fields(value) for m in error_messages(getattr(value, f.name))]
    if isinstance(value, (tuple, list)):
        return [m for v in value for m in error_messages(v)]
    return []


def assert_nothing_leaks(response: Any) -> None:
    leaked = [s for s in strings(response) if LEAK.search(s)]
    assert not leaked, leaked


def errors(response: Any) -> list[tuple[Any, Any]]:
    """(error code, error message) of every entry of the response that has an error code."""
    out = []
    if dataclasses.is_dataclass(response):
        if hasattr(response, "error_code"):
            out.append((response.error_code, getattr(response, "error_message", None)))
        for f in dataclasses.fields(response):
            out += errors(getattr(response, f.name))
    elif isinstance(response, (tuple, list)):
        for v in response:
            out += errors(v)
    return out


def handle(handler, gw, req) -> Any:
    return asyncio.run(handler(gw, req))


# -- the controller's calls: CreateTopics, CreatePartitions, DeleteTopics, IncrementalAlterConfigs ----


def died() -> ActorDiedError:
    context = ActorDiedErrorContext(
        error_message="The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR",
        node_ip_address="10.1.2.3", pid=4242, name="controller", ray_namespace="raygroups",
        class_name="ControllerActor", actor_id=bytes.fromhex(CONTROLLER_ACTOR_ID),
    )
    return ActorDiedError(context)


CONTROLLER_FAILURES = {
    # what the controller raised, as the gateway receives it -> the error Kafka answers
    "metadata write failed (full disk)": (lambda: ray_task_error(StorageError(STORAGE_TEXT), "create_topics"),
                                          ErrorCode.unknown_server_error),
    "a bug in the controller": (lambda: ray_task_error(KeyError("partitions"), "create_topics"), ErrorCode.unknown_server_error),
    "controller died": (died, ErrorCode.request_timed_out),
    "controller unreachable": (
        lambda: ActorUnavailableError("The actor is temporarily unavailable: RpcError: connection refused to 10.1.2.3:40123",
                                      bytes.fromhex(CONTROLLER_ACTOR_ID)),
        ErrorCode.request_timed_out,
    ),
}


class RaisingHandle:
    """A controller handle whose every call fails with `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, method: str) -> Any:
        async def fail(*_args: Any) -> Any:
            raise self.exc

        return SimpleNamespace(remote=fail)


def topics_gateway(controller: ControllerClient) -> Any:
    info = TopicInfo("kept", uuid.uuid4(), 1, False, {})
    leadership = Leadership(1, "c", [], {"kept": info}, {}, topics_by_id={info.topic_id: info})
    gw = gateway(leadership=leadership, **{"num.partitions": 1, "raygroups.max.partitions.per.topic": 100,
                                          "raygroups.max.partitions": 1000})
    gw.controller = controller
    return gw


CREATE = (topics.create_topics, ApiKey.CREATE_TOPICS, 7, {"timeout_ms": 1000, "validate_only": False, "topics": [
    {"name": "new", "num_partitions": 3, "replication_factor": -1, "assignments": [], "configs": []}]})
GROW = (topics.create_partitions, ApiKey.CREATE_PARTITIONS, 3, {"timeout_ms": 1000, "validate_only": False, "topics": [
    {"name": "kept", "count": 4, "assignments": None}]})
DELETE = (topics.delete_topics, ApiKey.DELETE_TOPICS, 5, {"timeout_ms": 1000, "topic_names": ["kept"]})
ALTER_GROUP = (configs.incremental_alter_configs, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
    {"resource_type": GROUP, "resource_name": "g",
     "configs": [{"name": "share.record.lock.duration.ms", "config_operation": 0, "value": "20000"}]}]})
CONTROLLER_CALLS = {"CreateTopics": CREATE, "CreatePartitions": GROW, "DeleteTopics": DELETE,
                    "IncrementalAlterConfigs": ALTER_GROUP}


@pytest.mark.parametrize("failure", list(CONTROLLER_FAILURES))
@pytest.mark.parametrize("api", list(CONTROLLER_CALLS))
def test_a_controller_call_that_fails_answers_kafkas_error_without_a_message(api, failure):
    make, code = CONTROLLER_FAILURES[failure]
    handler, key, version, body = CONTROLLER_CALLS[api]
    response = handle(handler, topics_gateway(ControllerClient(RaisingHandle(make()))), request(key, version, body))
    assert errors(response) == [(code, None)]
    assert_nothing_leaks(response)


def test_the_controller_over_a_full_disk_answers_unknown_server_error_with_no_message(tmp_path):
    """The real controller (its metadata runtime on a disk that fills) behind Ray's transport."""
    from tests.full_disk import FullDisk
    from tests.unit.controller.fake_pool import FakeClock, FakePool

    from cluster.control.controller import Controller
    from cluster.log import PartitionLog
    from cluster.metadata import CODEC, ClusterMetadata
    from cluster.runtime import CoordinatorRuntime, RuntimeConfig
    from cluster.log import coordinator_log_config
    from cluster.calls import Failed

    async def main() -> None:
        disk = FullDisk()
        settings = {"offsets.topic.num.partitions": 1, "share.coordinator.state.topic.num.partitions": 1,
                    "raygroups.coordinators": 1, "raygroups.share.coordinators": 1, "raygroups.partition.leaders": 1,
                    "num.partitions": 1}
        config = Config(settings)
        controller = Controller(config, tmp_path, "127.0.0.1", 0, "test", pool=FakePool(), clock=FakeClock())
        controller.metadata = CoordinatorRuntime(
            codec=CODEC, shard_factory=ClusterMetadata,
            config=RuntimeConfig(data_dir=tmp_path, log_config=coordinator_log_config(config)),
            executor=controller.executor, log_opener=lambda path, cfg: PartitionLog.open(path, cfg, disk),
        )
        await controller.start()
        try:
            from cluster.metadata import TopicSpec

            await controller.create_topics([TopicSpec("kept", 1)])
            gw = gateway(leadership=controller.snapshot(), **settings, **{
                "raygroups.max.partitions.per.topic": 100, "raygroups.max.partitions": 1000})
            gw.controller = ControllerClient(OverRay(controller, "ControllerActor"))

            async def refresh() -> None:
                gw.leadership = controller.snapshot()

            gw.router = SimpleNamespace(refresh=refresh)
            for api, (handler, key, version, body) in CONTROLLER_CALLS.items():
                with disk.filled():
                    response = await handler(gw, request(key, version, body))
                assert errors(response) == [(ErrorCode.unknown_server_error, None)], api
                assert_nothing_leaks(response)
            # Space again: the same requests go through.
            for api, (handler, key, version, body) in CONTROLLER_CALLS.items():
                response = await handler(gw, request(key, version, body))
                assert errors(response) == [(ErrorCode.none, None)], api
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_describe_configs_refusals_name_nothing_of_the_server():
    gw = topics_gateway(ControllerClient(RaisingHandle(died())))
    gw.node_id = 0
    gw.config = Config({})
    body = {"include_synonyms": False, "include_documentation": False, "resources": [
        {"resource_type": 2, "resource_name": "missing", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "bad/name", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "seven", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
        {"resource_type": GROUP, "resource_name": "", "configuration_keys": None},
        {"resource_type": 99, "resource_name": "x", "configuration_keys": None},
    ]}
    response = handle(configs.describe_configs, gw, request(ApiKey.DESCRIBE_CONFIGS, 4, body))
    assert all(code != ErrorCode.none for code, _ in errors(response))
    assert_nothing_leaks(response)


# -- the group coordinators: DeleteGroups, OffsetDelete, Alter/Delete/DescribeShareGroupOffsets ------


def leadership() -> Leadership:
    foo, bar = TopicInfo("foo", FOO, 2, False, {}), TopicInfo("bar", BAR, 1, False, {})
    return Leadership(version=1, cluster_id="c", gateways=[GatewayAddress(0, "h", 1)], topics={"foo": foo, "bar": bar},
                      leaders={}, handles={}, topics_by_id={FOO: foo, BAR: bar})


class Partitions:
    async def share_evict(self, group_id: str, partitions: Any, gateway: int) -> None:
        pass

    async def list_offsets(self, topic: str, partition: int, *args: Any) -> Any:
        from cluster.calls import LogEnd

        return LogEnd(ErrorCode.none, 10)


COORDINATOR_FAILURES = {
    # the group coordinator's answer, as its host builds it from the runtime's exception
    "storage failed": Failed(ErrorCode.coordinator_not_available, STORAGE_TEXT),
    "moved": Failed(ErrorCode.not_coordinator, "not the coordinator of __consumer_offsets-0 at epoch 3"),
    "loading": Failed(ErrorCode.coordinator_load_in_progress, "__consumer_offsets-0 is loading"),
    "no leader": NoLeader("coordinator of __consumer_offsets-0 is unavailable"),
}


class Router:
    """call_leader as the gateway's router makes it: `__consumer_offsets` calls run on the share
    context's shard (or get `coordinator`'s failure), `__share_group_state` calls get `share_state`'s
    answer (a Failed the real persister turns into its response)."""

    def __init__(self, ctx: ShareContext | None, coordinator: Any = None, share_state: Any = None) -> None:
        self.ctx, self.coordinator, self.share_state = ctx, coordinator, share_state

    async def call_leader(self, topic: str, partition: int, method: str, make_item: Any, not_leader: Any) -> Any:
        item = make_item(1)
        op, req = item.op, item.request
        failure = self.coordinator if topic == CONSUMER_OFFSETS else self.share_state
        if isinstance(failure, Exception):
            raise failure
        if failure is not None:
            return failure
        assert topic == CONSUMER_OFFSETS, (topic, op)
        return self.ctx.run(op.run(self.ctx.shard, req, None))

    async def refresh(self) -> None:
        pass

    def leader(self, topic: str, partition: int) -> Any:
        return ("group-coordinator-0", 1)


def empty_share_group() -> ShareContext:
    """A share group that had a member on foo and bar (their share state initialized), now Empty."""
    ctx = ShareContext(topic("foo", 2), topic("bar", 1))
    ctx.join("m1", ["foo", "bar"])
    ctx.initialize()
    ctx.heartbeat("m1", ctx.member("m1").member_epoch)
    ctx.leave("m1")
    return ctx


def groups_gateway(router: Router) -> Any:
    persister = Persister(router, 1, timeout_ms=0)  # a failure is answered at once, not retried
    coordinators = CoordinatorClient(router, 1)
    gw = gateway(coordinators=coordinators, groups=GroupCoordinatorService(coordinators, persister), partitions=Partitions(),
                 leadership=leadership())
    gw.persister = persister
    return gw


GROUP_CALLS = {
    "DeleteGroups": (groups.delete_groups, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]}),
    "OffsetDelete": (group_offsets_admin.offset_delete, ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
        {"name": "foo", "partitions": [{"partition_index": 0}]}]}),
    "AlterShareGroupOffsets": (group_offsets_admin.alter_share_group_offsets, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
        "group_id": "g", "topics": [{"topic_name": "foo", "partitions": [{"partition_index": 0, "start_offset": 3}]}]}),
    "DeleteShareGroupOffsets": (group_offsets_admin.delete_share_group_offsets, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {
        "group_id": "g", "topics": [{"topic_name": "foo"}]}),
    "DescribeShareGroupOffsets": (share_groups.describe_share_group_offsets, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {
        "groups": [{"group_id": "g", "topics": None}]}),
    "ShareGroupDescribe": (share_groups.share_group_describe, ApiKey.SHARE_GROUP_DESCRIBE, 1, {
        "group_ids": ["g"], "include_authorized_operations": False}),
}


@pytest.mark.parametrize("failure", list(COORDINATOR_FAILURES))
@pytest.mark.parametrize("api", list(GROUP_CALLS))
def test_a_group_coordinator_that_fails_answers_its_error_without_a_message(api, failure):
    handler, key, version, body = GROUP_CALLS[api]
    outcome = COORDINATOR_FAILURES[failure]
    code = ErrorCode.coordinator_not_available if isinstance(outcome, NoLeader) else outcome.error_code
    response = handle(handler, groups_gateway(Router(None, coordinator=outcome)), request(key, version, body))
    assert {c for c, _ in errors(response)} == {code}
    assert all(m is None for m in error_messages(response))
    assert_nothing_leaks(response)


SHARE_STATE_FAILURES = {
    "storage failed": Failed(ErrorCode.coordinator_not_available, STORAGE_TEXT.replace("__consumer_offsets", "__share_group_state")),
    "moved": Failed(ErrorCode.not_coordinator, "not the coordinator of __share_group_state-0 at epoch 3"),
    "no leader": NoLeader("no leader for __share_group_state-0"),
}


@pytest.mark.parametrize("failure", list(SHARE_STATE_FAILURES))
@pytest.mark.parametrize("api", ["DeleteGroups", "AlterShareGroupOffsets", "DeleteShareGroupOffsets", "DescribeShareGroupOffsets"])
def test_a_share_coordinator_that_fails_behind_the_persister_answers_without_a_message(api, failure):
    handler, key, version, body = GROUP_CALLS[api]
    router = Router(empty_share_group(), share_state=SHARE_STATE_FAILURES[failure])
    response = handle(handler, groups_gateway(router), request(key, version, body))
    failed = [(c, m) for c, m in errors(response) if c != ErrorCode.none]
    assert failed, errors(response)  # the share state's failure is answered
    assert all(m is None for _, m in failed), failed
    assert_nothing_leaks(response)


# -- Produce on a full disk ----------------------------------------------------------------------------


def test_a_produce_on_a_full_disk_answers_kafka_storage_error_without_a_message(tmp_path):
    from tests.full_disk import FullDisk
    from tests.unit.test_partition_leader import batch, leader_with

    async def main() -> None:
        disk = FullDisk()
        leader = await leader_with(tmp_path, ("t", 0, 1), file_ops=disk)

        class LeaderRouter:
            async def call_leader(self, topic, partition, method, make_item, not_leader):
                (outcome,) = await leader.produce([make_item(1)])
                return outcome

        info = TopicInfo("t", uuid.uuid4(), 1, False, {})
        gw = gateway(partitions=PartitionLeaderClient(LeaderRouter()),
                     leadership=Leadership(1, "c", [], {"t": info}, {}, topics_by_id={info.topic_id: info}))
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch(2)}]}]}
        for _ in range(2):  # a failed append, then a log that refuses appends until reopened
            with disk.filled():
                response = await produce.produce(gw, request(ApiKey.PRODUCE, 9, body))
            assert errors(response) == [(ErrorCode.kafka_storage_error, None)]
            assert_nothing_leaks(response)
        await leader.shutdown()

    asyncio.run(main())


# -- AlterUserScramCredentials on a full disk ----------------------------------------------------------


def test_alter_user_scram_credentials_on_a_full_disk_answers_unknown_server_error_without_a_message(tmp_path):
    store = CredentialStore(path_in(tmp_path))
    store.change(upserts=[("admin", make_credential("SCRAM-SHA-256", "admin-pw"))])
    # The store writes its new file next to the old one: here that write lands on a full device.
    Path(store.path.with_suffix(".tmp")).symlink_to("/dev/full")
    gw = SimpleNamespace(super_users=frozenset({"User:admin"}), credentials=store)
    req = request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [
        {"name": "bob", "mechanism": 1, "iterations": 4096, "salt": b"0123456789abcdef", "salted_password": b"x" * 32}]})
    req.session = Session(principal="User:admin")
    response = handle(scram_credentials.alter_user_scram_credentials, gw, req)
    assert errors(response) == [(ErrorCode.unknown_server_error, None)]
    assert_nothing_leaks(response)
