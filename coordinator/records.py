"""The group coordinator shard's codec (`__consumer_offsets`): classic, share and consumer record types.

Each group kind keeps its records next to its replay (coordinator/classic/records.py,
coordinator/share/records.py); this module only puts them in one codec, and re-exports them for
code outside coordinator/ that reads the log.
"""

from __future__ import annotations

from coordinator.classic import records as classic_records
from coordinator.consumer import records as consumer_records
from coordinator.share import records as share_records
from coordinator.classic.records import (  # noqa: F401  (re-exported: one place to import records from)
    GroupMetadataKey,
    MemberMetadata,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    ClassicGroupStateKey,
    group_metadata_record,
    empty_group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
    classic_group_state,
)
from coordinator.share.records import (  # noqa: F401  (re-exported: one place to import records from)
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareTopicPartitions,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataKey,
    ShareTopicPartitionsInfo,
    ShareTopicInfo,
    ShareGroupStatePartitionMetadataValue,
    share_group_epoch_record,
    share_group_epoch_tombstone,
    share_member_subscription_record,
    share_member_subscription_tombstone,
    share_target_assignment_record,
    share_target_assignment_tombstone,
    share_target_assignment_epoch_record,
    share_target_assignment_epoch_tombstone,
    share_current_assignment_record,
    share_current_assignment_tombstone,
    share_state_partition_metadata_record,
    share_state_partition_metadata_tombstone,
    SHARE_GROUP_KEYS,
    ShareAssignment,
)
from kernel.codec import RecordCodec

CODEC = RecordCodec("group-coordinator")
classic_records.register(CODEC)
share_records.register(CODEC)
consumer_records.register(CODEC)
