"""What the clients answer besides an operation's own response: a call that failed, and the
answers of calls that gather several actors' or read a partition's end."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kernel.message import message


@message
class Failed:
    """The call did not reach a coordinator that ran it (moving, loading, dead, storage failed):
    what the coordinator answers for an operation it could not run, and what the client answers
    for a call that found no coordinator. The gateway answers the API's error response."""

    error_code: ErrorCode
    message: str = ""


@message
class Deferred:
    """A coordinator's answer for an operation not finished within its call (it waits for a
    write the replicas have not committed yet): the call returns without it, so that one stalled
    partition does not hold the answers of every other partition's operations behind it (the
    gateway keeps two calls under way per coordinator), and the caller asks for the outcome on a
    call of its own (Endpoint.COORDINATOR_DEFERRED), as Kafka answers a delayed request alone."""

    actor: str
    incarnation: str
    ticket: int


@message
class Listing:
    """ListGroups over every coordinator: the groups, or the error that makes the answer partial."""

    error_code: ErrorCode
    groups: tuple[Any, ...] = ()


@message(flat=True)
class LogEnd:
    """ListOffsets of one partition: (error, offset, timestamp, leader epoch); the leaders'
    answer per item, flat as their items are."""

    error_code: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
