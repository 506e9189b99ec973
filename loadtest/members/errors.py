"""How a load test judges a Kafka error code: fine, to retry, or a failure.

Kafka marks its retriable errors (kio carries the flag). The group protocols add codes that are
part of normal operation, not failures: a JoinGroup answered MEMBER_ID_REQUIRED, a heartbeat told
REBALANCE_IN_PROGRESS, a member fenced after a rebalance it missed, a share acknowledgement of a
record whose lock expired. What is left (INVALID_REQUEST, UNSUPPORTED_VERSION,
INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, UNKNOWN_SERVER_ERROR, ...) is a failure.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

GROUP_FLOW = frozenset(
    {
        ErrorCode.member_id_required,
        ErrorCode.rebalance_in_progress,
        ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id,
        ErrorCode.fenced_member_epoch,
        ErrorCode.stale_member_epoch,
        ErrorCode.invalid_record_state,
        ErrorCode.share_session_not_found,
        ErrorCode.invalid_share_session_epoch,
        ErrorCode.offset_out_of_range,
        ErrorCode.duplicate_sequence_number,
        # Describing a group that does not exist (yet), creating a topic that does: answers.
        ErrorCode.group_id_not_found,
        ErrorCode.topic_already_exists,
    }
)

COORDINATOR_MOVED = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress}
)

LEADER_MOVED = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.kafka_storage_error,
        ErrorCode.not_enough_replicas,
    }
)

# What a client sees when no answer comes: the connection broke, or the request timed out.
TRANSPORT = frozenset({ErrorCode.network_exception, ErrorCode.request_timed_out})


def is_failure(code: ErrorCode) -> bool:
    """A load-test failure: a transport failure or a code neither retriable nor part of the protocol's flow."""
    if code == ErrorCode.none:
        return False
    if code in TRANSPORT:
        return True
    return not code.retriable and code not in GROUP_FLOW


def error_name(code: ErrorCode) -> str:
    return code.name.upper()
