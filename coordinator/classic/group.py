"""A classic group and its members, as the coordinator holds them (Kafka's ClassicGroup/ClassicGroupMember).

Members are immutable: a change makes a new member (`ClassicMember.but`). A group is changed
only on a private copy (`ClassicGroup.copy()`) that an operation then hands to replay, so the state
the runtime serves never sees a half-done operation (SPEC §4: only replay changes state). The
copy shares its member containers' bases (coordinator/classic/layered.py): an operation on one
member of a large group must not cost the group's size (issue 12).

What is durable of a group is what Kafka's GroupMetadata record holds (generation, protocol,
leader, members with their subscription and assignment); the rest (who is parked in JoinGroup or
SyncGroup, pending members, the rebalance in progress) is in memory only, as in Kafka, and is
gone after a failover: clients rejoin.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from coordinator.classic.layered import LayeredDict, LayeredSet
from coordinator.classic.messages import ListedGroup, OffsetCommitRequest, Protocols
from coordinator.classic.records import classic_group_state, group_tombstone, offset_tombstone
from coordinator.classic.state import ClassicGroupState
from coordinator.group import OffsetExpirationCondition
from kernel.codec import Record
from kernel.result import RequestToken

if TYPE_CHECKING:  # pragma: no cover
    from coordinator.group import Scheduler

_S = ClassicGroupState

CONSUMER_PROTOCOL_TYPE = "consumer"  # ConsumerProtocol.PROTOCOL_TYPE


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)



@dataclass(frozen=True, slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: RequestToken | None = None
    awaiting_sync: RequestToken | None = None
    is_new: bool = False

    def but(self, **changes: Any) -> "ClassicMember":
        """`dataclasses.replace` without its per-call introspection (a rebalance makes a few new
        members per member)."""
        if not changes.keys() <= _MEMBER_FIELDS:
            raise TypeError(f"ClassicMember has no field {sorted(changes.keys() - _MEMBER_FIELDS)}")
        clone = _new_member(ClassicMember)
        for name in _MEMBER_SLOTS:
            _set(clone, name, changes[name] if name in changes else getattr(self, name))
        return clone

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same metadata, same order: a rejoin that changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka: a new member can expire while parked; a known member parked in a rebalance cannot."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


_MEMBER_SLOTS = ClassicMember.__slots__
_MEMBER_FIELDS = frozenset(_MEMBER_SLOTS)
_new_member = object.__new__
_set = object.__setattr__


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = ClassicGroupState.EMPTY
    previous_state: ClassicGroupState | None = None
    state_timestamp: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: LayeredDict[str, ClassicMember] = field(default_factory=LayeredDict)
    static_members: LayeredDict[str, str] = field(default_factory=LayeredDict)  # group instance id -> member id
    pending_join_members: LayeredSet[str] = field(default_factory=LayeredSet)  # got MEMBER_ID_REQUIRED, not back yet
    pending_sync_members: LayeredSet[str] = field(default_factory=LayeredSet)  # joined this generation, not synced yet
    new_member_added: bool = False  # extends the initial delayed join
    supported_protocols: Counter = field(default_factory=Counter)  # protocol -> members supporting it
    num_awaiting_join: int = 0
    # Kafka's subscribedTopics: computed when a generation starts and when the group is loaded
    # (compute_subscribed_topics); None while unknown.
    subscribed_topics: frozenset[str] | None = None

    group_type = "classic"

    def copy(self) -> "ClassicGroup":
        clone = _new_group(ClassicGroup)
        for name in _GROUP_SLOTS:
            setattr(clone, name, getattr(self, name))
        clone.members = self.members.copy()
        clone.static_members = self.static_members.copy()
        clone.pending_join_members = self.pending_join_members.copy()
        clone.pending_sync_members = self.pending_sync_members.copy()
        clone.supported_protocols = Counter(self.supported_protocols)
        return clone

    def compact(self) -> None:
        """Called when replay installs this version: see LayeredDict.compact."""
        for container in (self.members, self.static_members, self.pending_join_members, self.pending_sync_members):
            container.compact()

    # -- state -----------------------------------------------------------------------------------

    def transition_to(self, target: ClassicGroupState, now: int) -> None:
        self.state.validate_transition(target)
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY)

    # -- members ---------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return self.static_members.get(group_instance_id) if group_instance_id is not None else None

    @property
    def num_members(self) -> int:
        return len(self.members)

    def is_empty(self) -> bool:
        return not self.members

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def shared(self, protocols: Protocols, client_id: str = "", client_host: str = "") -> tuple[Protocols, str, str]:
        """The leader's copies of these values where they are equal: members of a group mostly send
        the same subscription, client id and host, and each decoded request brings its own copy
        (an idle member's memory: issue 12)."""
        peer = self.members.get(self.leader_id) if self.leader_id is not None else None
        if peer is None:
            return protocols, client_id, client_host
        return (
            peer.protocols if peer.protocols == protocols else protocols,
            peer.client_id if peer.client_id == client_id else client_id,
            peer.client_host if peer.client_host == client_host else client_host,
        )

    def put(self, member: ClassicMember) -> None:
        """Add or replace a member, keeping the counters Kafka keeps alongside."""
        old = self.members.get(member.member_id)
        if old is None:
            self._count(member.protocols, 1)
        else:
            self.num_awaiting_join -= old.is_awaiting_join
            if old.protocols is not member.protocols and old.protocols != member.protocols:
                self._count(old.protocols, -1)
                self._count(member.protocols, 1)
        self.members[member.member_id] = member
        self.num_awaiting_join += member.is_awaiting_join
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) != member.member_id:
            self.static_members[member.group_instance_id] = member.member_id

    def _uncount(self, member: ClassicMember) -> None:
        self._count(member.protocols, -1)
        self.num_awaiting_join -= member.is_awaiting_join

    def _count(self, protocols: Protocols, step: int) -> None:
        counts = self.supported_protocols
        for name, _ in protocols:
            count = counts[name] + step
            if count > 0:
                counts[name] = count
            else:
                counts.pop(name, None)  # no zero counts: a protocol nobody supports is no candidate

    def add(self, member: ClassicMember) -> None:
        if member.group_instance_id is not None and member.group_instance_id in self.static_members:
            raise ValueError(f"instance id {member.group_instance_id} is owned by another member")
        if not self.members:
            self.protocol_type = member.protocol_type
        self.put(member)
        self.pending_join_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._uncount(removed)
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.leader_id == member_id:
            # Kafka takes the next member of its map; insertion order makes ours deterministic.
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return removed

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else promote the first member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        return {name for name, count in self.supported_protocols.items() if count == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == len(self.members) for name, _ in protocols
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all members support; most votes wins.

        Kafka breaks ties by hash-map order; we break them by the order of first vote, which is
        the members' join order, so the choice is deterministic.
        """
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def current_members_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader's JoinGroup response lists: (member id, instance id, metadata)."""
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def assignment_of(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.EMPTY, now)
        self.pending_sync_members.clear()

    # -- subscriptions (KIP-496) -------------------------------------------------------------------

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics: the topics the members' consumer-protocol subscriptions
        for the chosen protocol name, an empty set for a consumer group without members, None when
        unknown (another protocol type, no protocol chosen yet, or metadata that does not parse)."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        parsed: dict[bytes, set[str] | None] = {}  # members mostly share one subscription
        for member in self.members.values():
            metadata = member.metadata(self.protocol_name)
            if metadata not in parsed:
                parsed[metadata] = parse_subscription_topics(metadata)
            if parsed[metadata] is None:
                return None  # Kafka logs the SchemaException and knows no subscriptions
            topics |= parsed[metadata]  # type: ignore[operator]
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: when the subscriptions are not known, a consumer group is
        taken as subscribed to every topic, any other group to none."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    # -- the Group protocol (coordinator/group.py) ---------------------------------------------------

    def memory_record(self, group_id: str, group: "ClassicGroup | None") -> Record:
        return classic_group_state(group_id, group)

    def listed(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state.value, self.group_type)

    def validate_delete(self) -> ErrorCode | None:
        if self.is_in(_S.DEAD):
            return ErrorCode.group_id_not_found
        if not self.is_in(_S.EMPTY):
            return ErrorCode.non_empty_group
        return None

    def delete_records(self, offsets: Iterable[tuple[str, int]]) -> list[Record]:
        gid = self.group_id
        return [*(offset_tombstone(gid, t, p) for t, p in sorted(offsets)), group_tombstone(gid)]

    def share_state_deletes(self, image: Any) -> tuple:
        return ()

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateMember: a static id fences any other member id using it."""
        if group_instance_id is not None:
            existing = self.static_member_id(group_instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if not self.has_member(member_id):
            return ErrorCode.unknown_member_id
        return None

    def validate_offset_commit(self, req: OffsetCommitRequest) -> ErrorCode | None:
        if self.is_in(_S.DEAD):
            return ErrorCode.coordinator_not_available
        if req.generation_id < 0 and self.is_in(_S.EMPTY):
            return None  # a commit from outside group management into an Empty group
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self.validate_member(req.member_id, req.group_instance_id)
            if error is not None:
                return error
            if req.generation_id != self.generation_id:
                return ErrorCode.illegal_generation
        elif not self.is_in(_S.EMPTY):
            return ErrorCode.unknown_member_id
        if self.is_in(_S.COMPLETING_REBALANCE):
            # The member has the new generation but no assignment yet: let it finish the rebalance.
            return ErrorCode.rebalance_in_progress
        return None

    def validate_offset_fetch(self, member_id: str | None = None, member_epoch: int = -1) -> ErrorCode | None:
        return None  # Kafka's ClassicGroup.validateOffsetFetch checks neither member nor generation

    def validate_offset_delete(self) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateOffsetDelete (coordinator/classic/offset_delete.py)."""
        if self.is_in(_S.DEAD):
            return ErrorCode.group_id_not_found
        if self.is_in(_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE) and not self.uses_consumer_protocol():
            return ErrorCode.non_empty_group
        return None

    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        """Kafka's ClassicGroup.offsetExpirationCondition, whatever an old commit asked for:
        - Empty: retention counts from when the group became Empty (from each commit when the
          record had no state timestamp, an old schema);
        - Stable consumer group whose subscriptions are known (KIP-496): from each commit, for the
          topics it no longer subscribes to (the caller asks is_subscribed_to_topic);
        - no protocol type (a "simple" group of committed offsets only): from each commit;
        - otherwise (rebalancing, or subscriptions unknown) offsets do not expire."""
        if self.protocol_type:
            if self.is_in(_S.EMPTY):
                return OffsetExpirationCondition(self.state_timestamp if self.state_timestamp >= 0 else None)
            if self.uses_consumer_protocol() and self.subscribed_topics is not None and self.is_in(_S.STABLE):
                return OffsetExpirationCondition()
            return None
        return OffsetExpirationCondition()

    def is_deletable_without_offsets(self) -> bool:
        return self.is_in(_S.EMPTY) and self.is_empty()

    def arm_sessions(self, ctx: "Scheduler") -> None:
        for member in self.members.values():
            ctx.schedule(heartbeat_key(self.group_id, member.member_id), member.session_timeout_ms,
                         "expire_heartbeat", self.group_id, member.member_id)

    def durable_view(self) -> tuple[Any, ...]:
        return (
            self.state.value,
            self.generation_id,
            self.protocol_type or None,
            self.protocol_name,
            self.leader_id,
            tuple(
                (m.member_id, m.group_instance_id, m.session_timeout_ms, m.rebalance_timeout_ms,
                 m.metadata(self.protocol_name), m.assignment)
                for m in self.members.values()
            ),
        )


_GROUP_SLOTS = ClassicGroup.__slots__
_new_group = object.__new__


def parse_subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, read as version 0, the prefix of every version
    (as Kafka does, so a newer client's subscription still parses); None if it does not parse."""
    try:
        offset = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, offset)
        offset += 4
        if count < 0:
            return None
        topics = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, offset)
            offset += 2
            if length < 0 or offset + length > len(metadata):
                return None
            topics.add(metadata[offset : offset + length].decode("utf-8"))
            offset += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
