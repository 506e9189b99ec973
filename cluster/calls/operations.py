"""What each actor kind runs, as values: the operations of the coordinators' shards and the actor
methods the clients call, each carrying what string tables carried before (the shard method, the
request type, and whether it parks, is watched for rebalances, counts as a commit, or leaves
share state to initialize or delete).

A coordinator runs `item.op.run(shard, request, token)`: each member holds the shard's own
function, so nothing is looked up by name per request and an operation the shard lacks fails at
import; tests/unit/test_operations.py holds each member's request type against the function's.
Members cross Ray on every item; they pickle as their qualified name (a global, like a class),
which loads by attribute lookup instead of Enum's call on the value.
"""

from __future__ import annotations

import enum
from typing import Any

from coordinator.classic import offset_delete
from coordinator.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from coordinator.consumer.messages import ConsumerGroupHeartbeatRequest
from coordinator.share import offsets_admin
from coordinator.share.messages import ShareGroupHeartbeatRequest
from coordinator.shard import GroupCoordinatorShard
from sharestate import messages as m
from sharestate.coordinator_shard import ShareCoordinatorShard

from cluster.calls.kinds import ActorKind


class Trait(enum.Flag):
    NONE = 0
    PARKS = enum.auto()  # may wait for the rest of the group: started, answered on the channel
    WATCHED = enum.auto()  # may begin or end a rebalance: the rebalance metrics look at the group
    COMMITS = enum.auto()  # counted as an offset commit
    INITIALIZES_SHARE_STATE = enum.auto()  # its outcome may name share partitions to initialize
    DELETES_SHARE_STATE = enum.auto()  # its outcome may name share state left to delete
    READS = enum.auto()  # writes nothing but rarely: tried at once on a partition at rest (runtime.submit's at_once)


GroupIds = tuple[str, ...]  # operations over several groups of one partition take their ids


class _PickledByName(enum.Enum):
    def __reduce_ex__(self, protocol: Any) -> str:
        return f"{type(self).__qualname__}.{self.name}"


class CoordinatorOp(_PickledByName):
    """Operations of a group coordinator on one `__consumer_offsets` partition.

    value: (the shard's function, request type, traits)."""

    JOIN = (GroupCoordinatorShard.join_group, JoinGroupRequest, Trait.PARKS | Trait.WATCHED)
    SYNC = (GroupCoordinatorShard.sync_group, SyncGroupRequest, Trait.PARKS | Trait.WATCHED)
    HEARTBEAT = (GroupCoordinatorShard.heartbeat, HeartbeatRequest, Trait.WATCHED | Trait.READS)
    LEAVE = (GroupCoordinatorShard.leave_group, LeaveGroupRequest, Trait.WATCHED)
    COMMIT = (GroupCoordinatorShard.commit_offsets, OffsetCommitRequest, Trait.COMMITS)
    FETCH_OFFSETS = (GroupCoordinatorShard.fetch_offsets, OffsetFetchRequest, Trait.READS)
    DESCRIBE = (GroupCoordinatorShard.describe_groups, GroupIds, Trait.READS)
    DELETE = (GroupCoordinatorShard.delete_groups, GroupIds, Trait.DELETES_SHARE_STATE)
    SHARE_HEARTBEAT = (
        GroupCoordinatorShard.share_group_heartbeat, ShareGroupHeartbeatRequest, Trait.WATCHED | Trait.INITIALIZES_SHARE_STATE
    )
    CONSUMER_HEARTBEAT = (GroupCoordinatorShard.consumer_group_heartbeat, ConsumerGroupHeartbeatRequest, Trait.WATCHED)
    CONSUMER_DESCRIBE = (GroupCoordinatorShard.consumer_group_describe, GroupIds, Trait.READS)
    SHARE_DESCRIBE = (GroupCoordinatorShard.share_group_describe, GroupIds, Trait.READS)
    SHARE_TOPICS = (GroupCoordinatorShard.share_group_topics, GroupIds, Trait.NONE)
    SHARE_DELETE_PREPARE = (GroupCoordinatorShard.share_group_delete_prepare, GroupIds, Trait.NONE)
    OFFSET_DELETE = (GroupCoordinatorShard.delete_offsets, offset_delete.OffsetDeleteRequest, Trait.NONE)
    SHARE_OFFSETS_ALTER = (
        GroupCoordinatorShard.alter_share_group_offsets, offsets_admin.AlterShareOffsetsRequest, Trait.NONE
    )
    SHARE_OFFSETS_INITIALIZED = (
        GroupCoordinatorShard.share_offsets_initialized, offsets_admin.ShareOffsetsInitialized, Trait.NONE
    )
    SHARE_OFFSETS_DELETE = (
        GroupCoordinatorShard.share_offsets_delete_initiate, offsets_admin.DeleteShareOffsetsRequest, Trait.NONE
    )
    SHARE_OFFSETS_DELETE_COMPLETE = (
        GroupCoordinatorShard.share_offsets_delete_complete, offsets_admin.CompleteShareOffsetsDelete, Trait.NONE
    )

    def __init__(self, run: Any, request_type: type, traits: Trait) -> None:
        self.run = run  # (shard, request, token) -> Result
        self.request_type = request_type
        self.parks = Trait.PARKS in traits
        self.watched = Trait.WATCHED in traits
        self.commits = Trait.COMMITS in traits
        self.initializes_share_state = Trait.INITIALIZES_SHARE_STATE in traits
        self.deletes_share_state = Trait.DELETES_SHARE_STATE in traits
        self.reads = Trait.READS in traits
        # Its outcome may leave share-state work for the service (cluster/services/share_group_state.py):
        # only then does the actor hand the outcome on; a heartbeat never goes there.
        self.follows_up = self.initializes_share_state or self.deletes_share_state


class ShareStateOp(_PickledByName):
    """Operations of a share coordinator on one `__share_group_state` partition (Kafka's Persister
    calls). value: (the shard's function, request type, response type)."""

    INITIALIZE = (ShareCoordinatorShard.initialize_state, m.InitializeShareGroupStateRequest, m.InitializeShareGroupStateResponse)
    READ = (ShareCoordinatorShard.read_state, m.ReadShareGroupStateRequest, m.ReadShareGroupStateResponse)
    WRITE = (ShareCoordinatorShard.write_state, m.WriteShareGroupStateRequest, m.WriteShareGroupStateResponse)
    DELETE = (ShareCoordinatorShard.delete_state, m.DeleteShareGroupStateRequest, m.DeleteShareGroupStateResponse)
    SUMMARY = (
        ShareCoordinatorShard.read_state_summary, m.ReadShareGroupStateSummaryRequest, m.ReadShareGroupStateSummaryResponse
    )

    def __init__(self, run: Any, request_type: type, response_type: type) -> None:
        self.run = run  # (shard, request, token) -> Result
        self.request_type = request_type
        self.response_type = response_type  # what the persister answers when it gives up
        # Reads write nothing: tried at once on a partition at rest (runtime.submit's at_once).
        self.reads = run in (ShareCoordinatorShard.read_state, ShareCoordinatorShard.read_state_summary)


class Endpoint(_PickledByName):
    """The actor methods the clients call. value: (actor kind, Ray method, batched, packed).

    Batched: every call to one actor within a loop tick travels as one Ray call carrying the list
    of items (cluster/clients/batchers.py). Packed: that list and its answers cross as one C
    pickle each (cluster/calls/packing.py), the group coordinators' batches."""

    COORDINATOR = (ActorKind.GROUP_COORDINATOR, "execute", True, True)
    COORDINATOR_PARKED = (ActorKind.GROUP_COORDINATOR, "execute_parked", True, False)
    # The outcome of an operation `execute` answered Deferred, one call each (they are rare: an
    # operation still waiting for its commit when its batch's call returned).
    COORDINATOR_DEFERRED = (ActorKind.GROUP_COORDINATOR, "deferred", False, False)
    SHARE_STATE = (ActorKind.SHARE_COORDINATOR, "execute", True, False)
    PRODUCE = (ActorKind.PARTITION_LEADER, "produce", True, False)
    LIST_OFFSETS = (ActorKind.PARTITION_LEADER, "list_offsets", True, False)
    FETCH = (ActorKind.PARTITION_LEADER, "fetch", False, False)
    SHARE_FETCH = (ActorKind.PARTITION_LEADER, "share_fetch", False, False)
    SHARE_WAKE = (ActorKind.PARTITION_LEADER, "share_wake", False, False)
    SHARE_RELEASE = (ActorKind.PARTITION_LEADER, "share_release", False, False)
    SHARE_EVICT = (ActorKind.PARTITION_LEADER, "share_evict", False, False)
    # A follower host's fetch from the host of its partitions' leader replicas (issue 25): one
    # call carries every partition it follows from there, a long poll (cluster/replication/).
    # The coordinators have it too, for their internal topics' replicas (the kind names one).
    REPLICA_FETCH = (ActorKind.PARTITION_LEADER, "replica_fetch", False, False)

    def __init__(self, kind: ActorKind, method: str, batched: bool, packed: bool) -> None:
        self.kind = kind
        self.method = method
        self.batched = batched
        self.packed = packed
