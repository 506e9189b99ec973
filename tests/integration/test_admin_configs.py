"""Kafka's config admin calls against a live cluster, through confluent_kafka.admin.AdminClient:
describe_configs for BROKER, TOPIC and GROUP resources, incremental_alter_configs on a GROUP, and
what a group's settings do to real share consumers (tests/share_consumer_proc.py): a group set to
start at the earliest record gets records produced before it joined (the broker's default is
latest), a group with a short lock gets an unacknowledged record again once that lock expires, a
share member's heartbeat interval follows its group's, and the settings survive a restart on the
same data directory."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from kio.schema.errors import ErrorCode

from cluster.gateway.apis import SUPPORTED, ApiKey
from tests.clients import confluent_produce, create_topic
from tests.cluster_process import ClusterProcess
from tests.kio_client import KioClient
from tests.share_runs import ShareConsumerProc, wait_until

BROKER_LOCK_MS = 45_000  # the broker's; the groups below get 15 s (Kafka's lowest by default)
ARGS = (
    "--config", "share.auto.offset.reset=latest",
    "--config", "group.share.heartbeat.interval.ms=500",
    "--config", "group.share.session.timeout.ms=10000",
    "--config", f"group.share.record.lock.duration.ms={BROKER_LOCK_MS}",
    "--config", "message.max.bytes=2000000",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    proc = ClusterProcess(tmp_path_factory.mktemp("admin-configs"), *ARGS).start()
    yield proc
    proc.stop()


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def describe(cluster, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    client = admin(cluster)  # kept until the answer: a client destroyed meanwhile fails the call
    (future,) = client.describe_configs([ConfigResource(kind, name)]).values()
    return future.result(30)


def alter_group(cluster, group: str, *entries: tuple[str, str | None, AlterConfigOpType], validate_only: bool = False):
    resource = ConfigResource(
        ResourceType.GROUP, group,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries],
    )
    client = admin(cluster)
    (future,) = client.incremental_alter_configs([resource], validate_only=validate_only).values()
    return future.result(30)


SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def error_of(call) -> int:
    with pytest.raises(KafkaException) as info:
        call()
    return info.value.args[0].code()


def test_describe_broker_lists_every_setting_with_its_source(cluster):
    node_id = next(iter(admin(cluster).list_topics(timeout=10).brokers))
    entries = describe(cluster, ResourceType.BROKER, str(node_id))
    assert entries["message.max.bytes"].value == "2000000"
    assert entries["message.max.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["num.partitions"].value == "1" and entries["num.partitions"].is_default
    assert all(e.is_read_only for e in entries.values())
    assert "raygroups.partition.leaders" in entries


def test_describe_topic_shows_what_raygroups_applies(cluster):
    create_topic(cluster.bootstrap, "described", 2)
    entries = describe(cluster, ResourceType.TOPIC, "described")
    assert entries["cleanup.policy"].value == "delete"
    assert entries["max.message.bytes"].value == "2000000"
    assert entries["retention.ms"].value == "-1"
    assert int(entries["segment.bytes"].value) > 0
    assert describe(cluster, ResourceType.TOPIC, "__consumer_offsets")["cleanup.policy"].value == "compact"
    code = error_of(lambda: describe(cluster, ResourceType.TOPIC, "no-such-topic"))
    assert code == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_and_describe_a_groups_settings(cluster):
    plain = describe(cluster, ResourceType.GROUP, "cfg")
    assert plain["share.auto.offset.reset"].value == "latest"
    assert plain["share.record.lock.duration.ms"].value == str(BROKER_LOCK_MS)
    # Not the group's own: the broker's, given at its start.
    assert plain["share.record.lock.duration.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert plain["share.delivery.count.limit"].source == ConfigSource.DEFAULT_CONFIG.value

    alter_group(cluster, "cfg", ("share.delivery.count.limit", "3", SET), validate_only=True)
    assert describe(cluster, ResourceType.GROUP, "cfg")["share.delivery.count.limit"].value == "5"
    alter_group(cluster, "cfg", ("share.delivery.count.limit", "3", SET), ("share.auto.offset.reset", "earliest", SET))
    entries = describe(cluster, ResourceType.GROUP, "cfg")
    assert entries["share.delivery.count.limit"].value == "3"
    assert entries["share.delivery.count.limit"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["share.auto.offset.reset"].value == "earliest"
    alter_group(cluster, "cfg", ("share.delivery.count.limit", None, DELETE))
    assert describe(cluster, ResourceType.GROUP, "cfg")["share.delivery.count.limit"].value == "5"

    for entry in [("share.delivery.count.limit", "11", SET), ("share.record.lock.duration.ms", "100", SET),
                  ("share.session.timeout.ms", "60001", SET), ("no.such.config", "1", SET),
                  ("share.isolation.level", "dirty", SET), ("share.record.lock.duration.ms", "20000", APPEND),
                  # Not above the broker's 10 s session timeout (Kafka's validateValues relation).
                  ("share.heartbeat.interval.ms", "10000", SET)]:
        assert error_of(lambda: alter_group(cluster, "cfg", entry)) == KafkaError.INVALID_CONFIG, entry


def share_heartbeat(client: KioClient, group: str, member: str, epoch: int, topic: str):
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": [topic] if epoch == 0 else None}
    answer = client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, body)
    assert answer.error_code == ErrorCode.none, answer
    return answer


def test_a_share_members_heartbeat_interval_follows_its_groups_setting(cluster):
    """Kafka's shareGroupHeartbeatIntervalMs: the group's share.heartbeat.interval.ms, from the
    member's next heartbeat after a change; other groups keep the broker's (500 ms here)."""
    create_topic(cluster.bootstrap, "paced", 1)
    alter_group(cluster, "paced", ("share.heartbeat.interval.ms", "1500", SET), ("share.session.timeout.ms", "12000", SET))
    assert describe(cluster, ResourceType.GROUP, "paced")["share.heartbeat.interval.ms"].value == "1500"
    member, epoch = str(uuid.uuid4()), 0
    with KioClient(cluster.bootstrap) as client:

        def interval_is(group: str, wanted: int) -> bool:
            nonlocal epoch
            answer = share_heartbeat(client, group, member, epoch, "paced")
            epoch = answer.member_epoch
            return answer.heartbeat_interval == timedelta(milliseconds=wanted)

        wait_until(lambda: interval_is("paced", 1500), timeout=30, what="the group's heartbeat interval")
        other = share_heartbeat(client, "unpaced", str(uuid.uuid4()), 0, "paced")
        assert other.heartbeat_interval == timedelta(milliseconds=500)
        alter_group(cluster, "paced", ("share.heartbeat.interval.ms", "2500", SET))
        wait_until(lambda: interval_is("paced", 2500), timeout=30, what="the changed heartbeat interval")
        alter_group(cluster, "paced", ("share.heartbeat.interval.ms", None, DELETE))
        wait_until(lambda: interval_is("paced", 500), timeout=30, what="the broker's heartbeat interval again")


def test_every_advertised_version(cluster):
    """Each version ApiVersions advertises, raw (clients negotiate only one)."""
    group = {"resource_type": 32, "resource_name": "versions", "configuration_keys": None}
    with KioClient(cluster.bootstrap) as client:
        lo, hi = SUPPORTED[ApiKey.DESCRIBE_CONFIGS]
        for v in range(lo, hi + 1):
            body = {"resources": [group], "include_synonyms": True, "include_documentation": True}
            (result,) = client.call(ApiKey.DESCRIBE_CONFIGS, v, body).results
            assert result.error_code == ErrorCode.none, v
            assert {c.name: c.value for c in result.configs}["share.delivery.count.limit"] == "5", v
        lo, hi = SUPPORTED[ApiKey.INCREMENTAL_ALTER_CONFIGS]
        for v in range(lo, hi + 1):
            configs = [{"name": "share.delivery.count.limit", "config_operation": 0, "value": str(3 + v)}]
            body = {"resources": [{"resource_type": 32, "resource_name": "versions", "configs": configs}],
                    "validate_only": False}
            (answer,) = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, v, body).responses
            assert answer.error_code == ErrorCode.none, v
    assert describe(cluster, ResourceType.GROUP, "versions")["share.delivery.count.limit"].value == str(3 + hi)


def test_a_group_set_to_earliest_gets_records_produced_before_it_joined(cluster):
    create_topic(cluster.bootstrap, "before", 1)
    confluent_produce(cluster.bootstrap, "before", [(0, b"k", f"v{i}".encode(), []) for i in range(5)])
    alter_group(cluster, "early", ("share.auto.offset.reset", "earliest", SET))
    consumer = ShareConsumerProc.start("early", cluster.bootstrap, "early", "before", "--idle", "60")
    try:
        deadline = time.time() + 60
        while len({d["o"] for d in consumer.delivered()}) < 5 and time.time() < deadline:
            consumer.wait_for("delivered", timeout=max(1, deadline - time.time()))
            time.sleep(0.1)
        assert sorted({d["o"] for d in consumer.delivered()}) == [0, 1, 2, 3, 4]
    finally:
        consumer.kill()


def test_a_groups_short_lock_redelivers_an_unacknowledged_record(cluster):
    create_topic(cluster.bootstrap, "locked", 1)
    alter_group(cluster, "short", ("share.auto.offset.reset", "earliest", SET),
                ("share.record.lock.duration.ms", "15000", SET))
    confluent_produce(cluster.bootstrap, "locked", [(0, b"k", b"held", [])])
    holder = ShareConsumerProc.start("holder", cluster.bootstrap, "short", "locked", "--policy", "hold")
    other = None
    try:
        first = holder.wait_for("delivered", timeout=60)
        assert first["dc"] == 1
        other = ShareConsumerProc.start("other", cluster.bootstrap, "short", "locked", "--idle", "90")
        again = other.wait_for("delivered", timeout=90)
        assert again["o"] == first["o"] and again["dc"] == 2
        # The group's 15 s lock, not the broker's 45 s, released it.
        assert again["at"] - first["at"] < BROKER_LOCK_MS / 1000 - 5
    finally:
        holder.kill()
        if other is not None:
            other.kill()


def test_group_settings_survive_a_restart(cluster):
    alter_group(cluster, "kept", ("share.record.lock.duration.ms", "20000", SET))
    cluster.stop()
    again = ClusterProcess(cluster.data_dir, *ARGS).start()
    try:
        entries = describe(again, ResourceType.GROUP, "kept")
        assert entries["share.record.lock.duration.ms"].value == "20000"
        assert entries["share.record.lock.duration.ms"].source == ConfigSource.GROUP_CONFIG.value
    finally:
        again.stop()
