"""A share member's lifecycle, settings, share sessions and acknowledgement decisions
(loadtest/members/share.py is the member)."""

from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from loadtest.members.machine import Broker

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
ACK_NAMES = {ACCEPT: "ACCEPT", RELEASE: "RELEASE", REJECT: "REJECT"}
SESSION_RESET = frozenset(
    {ErrorCode.share_session_not_found, ErrorCode.invalid_share_session_epoch, ErrorCode.share_session_limit_reached}
)
TP = tuple[Any, int]  # (topic id, partition)


class ShareState(enum.Enum):
    """JOINING -> STABLE (the first heartbeat answered with an epoch); STABLE -> JOINING (fenced:
    join again); JOINING | STABLE -> LEAVING -> STOPPED; any -> STOPPED on a fatal error."""

    JOINING = "joining"
    STABLE = "stable"
    LEAVING = "leaving"
    STOPPED = "stopped"


TRANSITIONS = {
    ShareState.JOINING: frozenset({ShareState.STABLE, ShareState.LEAVING, ShareState.STOPPED}),
    ShareState.STABLE: frozenset({ShareState.JOINING, ShareState.LEAVING, ShareState.STOPPED}),
    ShareState.LEAVING: frozenset({ShareState.STOPPED}),
    ShareState.STOPPED: frozenset(),
}


def new_member_id() -> str:
    """What Kafka clients send: a random UUID in Kafka's URL-safe base64 (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(slots=True)
class ShareConfig:
    group_id: str
    topics: list[str]
    accept: float = 1.0
    release: float = 0.0
    reject: float = 0.0
    processing_ms: float = 0.0
    max_records: int = 500
    max_wait_ms: int = 500
    piggyback: bool = True
    seed: int | None = None


@dataclass(slots=True)
class Decision:
    offset: int
    kind: int  # GAP, ACCEPT, RELEASE, REJECT
    delivery_count: int


@dataclass(slots=True)
class Session:
    broker: Broker
    epoch: int = 0
    partitions: set[TP] = field(default_factory=set)
    busy: bool = False  # a ShareFetch or ShareAcknowledge in flight
    processing: bool = False  # records handed over, acknowledgements not ready yet
    ready: dict[TP, list[Decision]] = field(default_factory=dict)  # to acknowledge on the next request
    closing: bool = False
