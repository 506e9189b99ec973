"""Handlers per API: `async def handle(gw, request) -> kio response | None`."""

from __future__ import annotations

from cluster.gateway.apis import ADMIN_API_KEY, ApiKey
from cluster.gateway.handlers import admin, auth, configs, consumer_groups, fetch, group_offsets_admin, groups, meta, produce, producer_id, reassignments, scram_credentials, share_fetch, share_groups, topics

HANDLERS = {
    ApiKey.API_VERSIONS: meta.api_versions,
    ApiKey.METADATA: meta.metadata,
    ApiKey.DESCRIBE_CLUSTER: meta.describe_cluster,
    ApiKey.FIND_COORDINATOR: meta.find_coordinator,
    ApiKey.CREATE_TOPICS: topics.create_topics,
    ApiKey.DELETE_TOPICS: topics.delete_topics,
    ApiKey.CREATE_PARTITIONS: topics.create_partitions,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: reassignments.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: reassignments.list_partition_reassignments,
    ApiKey.PRODUCE: produce.produce,
    ApiKey.FETCH: fetch.fetch,
    ApiKey.LIST_OFFSETS: fetch.list_offsets,
    ApiKey.INIT_PRODUCER_ID: producer_id.init_producer_id,
    ApiKey.JOIN_GROUP: groups.join_group,
    ApiKey.SYNC_GROUP: groups.sync_group,
    ApiKey.HEARTBEAT: groups.heartbeat,
    ApiKey.LEAVE_GROUP: groups.leave_group,
    ApiKey.OFFSET_COMMIT: groups.offset_commit,
    ApiKey.OFFSET_FETCH: groups.offset_fetch,
    ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
    ApiKey.LIST_GROUPS: groups.list_groups,
    ApiKey.DELETE_GROUPS: groups.delete_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_groups.consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_groups.consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: share_groups.share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_groups.share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_groups.describe_share_group_offsets,
    ApiKey.OFFSET_DELETE: group_offsets_admin.offset_delete,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: group_offsets_admin.alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: group_offsets_admin.delete_share_group_offsets,
    ApiKey.SHARE_FETCH: share_fetch.share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_fetch.share_acknowledge,
    ApiKey.SASL_HANDSHAKE: auth.sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: auth.sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_credentials.describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_credentials.alter_user_scram_credentials,
    ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
    ADMIN_API_KEY: admin.admin,
}
