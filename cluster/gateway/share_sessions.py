"""Share sessions (KIP-932): which partitions a member fetches through this gateway, and its epoch.

Kafka keeps one share session per (group, member) on each broker the member fetches from:
- ShareFetch with epoch 0 opens it (replacing any earlier one, whose records stay with the
  member) with the partitions it names; acknowledgements cannot ride on it (INVALID_REQUEST),
  and when the cache holds
  `group.share.max.share.sessions` sessions already it is refused (SHARE_SESSION_LIMIT_REACHED);
- later requests carry the epoch the session expects, which then moves on (wrapping to 1 after
  2^31-1); they add partitions and forget others (ForgottenTopicsData); a missing session is
  SHARE_SESSION_NOT_FOUND, another epoch INVALID_SHARE_SESSION_EPOCH;
- epoch -1 closes it (after its acknowledgements), and so does the closing of the connection that
  created it: then what the member holds on the session's partitions is released at once. A final
  ShareFetch may name partitions (the Java client names those it acknowledges on close): none is
  fetched or added (Kafka 4.2's FinalContext; the INVALID_REQUEST Kafka 4.0 answered to partitions
  with PartitionMaxBytes went with that field in KAFKA-18932).

A session belongs to the connection that created it (Kafka 4.2's ShareSession.connectionId and
ShareSessionCache.connectionIdToSessionMap). Its later requests may come on any connection and do
not move it; a connection's close ends only a session it created that is still in the cache (a
replaced or closed one is stale there, KAFKA-19950). So when a member reconnects and opens epoch 0
before its old connection's close is processed, that close ends nothing: the new session and what
the member holds stay.

ShareAcknowledge uses the same session and advances the same epoch; it cannot open one.
Plain data and checks only: the gateway's handler does the I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1

SharePartitionId = tuple[Any, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


class SessionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(eq=False, slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # what the next request must carry
    connection_id: int  # the connection that created it: only its close ends the session
    partitions: dict[SharePartitionId, None] = field(default_factory=dict)  # insertion-ordered set
    requests: int = 0  # rotates which partition is served first
    # The gateway's pending leader calls for it: task -> (actor name, wake key).
    in_flight: dict[Any, tuple[str, str]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return self.group_id, self.member_id

    def rotated(self) -> list[SharePartitionId]:
        """The session's partitions starting one further each request, so that max_records is
        not always spent on the same partition first (Kafka's PartitionRotateStrategy)."""
        parts = list(self.partitions)
        if not parts:
            return parts
        shift = self.requests % len(parts)
        return parts[shift:] + parts[:shift]


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Per group: the share partitions its sessions here have fetched, for evicting them once
        # the group has no session left here (Kafka's ShareGroupListener.onGroupEmpty).
        self.touched: dict[str, set[SharePartitionId]] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def holds(self, session: ShareSession) -> bool:
        """Whether `session` is still the member's session here. One out of the cache (closed,
        replaced, its connection gone) starts no further acquisitions: the release that ended it
        may already have run at the leader."""
        return self.sessions.get(session.key) is session

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        connection_id: int,
        added: Iterable[SharePartitionId] = (),
        forgotten: Iterable[SharePartitionId] = (),
        acknowledging: bool = False,
    ) -> tuple[ShareSession, bool]:
        """The session a ShareFetch runs in, and whether this request closes it (final epoch:
        the session is out of the cache already, its records are to be released)."""
        key = (group_id, member_id)
        added = list(added)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise SessionError(ErrorCode.invalid_request, "acknowledgements cannot open a share session (epoch 0)")
            replaced = self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                if replaced is not None:
                    self.sessions[key] = replaced
                raise SessionError(
                    ErrorCode.share_session_limit_reached,
                    f"this broker holds group.share.max.share.sessions={self.max_sessions} share sessions",
                )
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection_id)
            session.partitions.update(dict.fromkeys(added))
            self.sessions[key] = session
            self.touched.setdefault(group_id, set()).update(added)
            return session, False
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.share_session_not_found, f"no share session for member {member_id}")
        if epoch == FINAL_EPOCH:
            del self.sessions[key]  # partitions named in a final fetch are not fetched (FinalContext)
            return session, True
        if epoch != session.epoch:
            raise SessionError(
                ErrorCode.invalid_share_session_epoch,
                f"share session epoch {epoch} of member {member_id} is not the expected {session.epoch}",
            )
        # Kafka's ShareSession.update: the request's partitions are added first, then the
        # forgotten ones removed, so a partition listed only for its acknowledgements and forgotten
        # in the same request (its member now fetches it through another gateway) is not fetched.
        session.partitions.update(dict.fromkeys(added))
        for tp in forgotten:
            session.partitions.pop(tp, None)
        self.touched.setdefault(group_id, set()).update(added)
        session.epoch = next_epoch(epoch)
        session.requests += 1
        return session, False

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a ShareAcknowledge runs in; for the final epoch it is out of the cache already."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session")
        key = (group_id, member_id)
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.share_session_not_found, f"no share session for member {member_id}")
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return session
        if epoch != session.epoch:
            raise SessionError(
                ErrorCode.invalid_share_session_epoch,
                f"share session epoch {epoch} of member {member_id} is not the expected {session.epoch}",
            )
        session.epoch = next_epoch(epoch)
        return session

    def group_emptied(self, group_id: str) -> set[SharePartitionId]:
        """If no session of the group is left here: the partitions its sessions fetched (once)."""
        if any(g == group_id for g, _ in self.sessions):
            return set()
        return self.touched.pop(group_id, set())

    def disconnected(self, connection_id: int) -> list[ShareSession]:
        """Remove and return the sessions this connection created that are still in the cache.

        Kafka's connectionIdToSessionMap holds one session per connection (the last it created);
        a connection here may carry several members' sessions (a raw client), and each ends with it.
        """
        gone = [s for s in self.sessions.values() if s.connection_id == connection_id]
        for session in gone:
            del self.sessions[session.key]
        return gone
