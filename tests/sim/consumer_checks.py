"""The consumer groups' invariants in the composed coordinator world, checked after every step.

The coordinator's durable state is its log: each `__consumer_offsets` partition's log, on the
world's memory disk, is replayed as it grows into a shard of our own (`rebuilt`), one batch at a
time, in the order the leaders appended them.

1. A member's epoch never goes back while the member exists: every ConsumerGroupCurrentMemberAssignment
   record of a member carries an epoch at least that of the one before it. A member exists from its
   first record to its tombstone (fenced, expired or left): a member id that comes back after a
   tombstone (a client rejoining with its id at epoch 0) starts over. The clients' side: an epoch a
   client is told never goes back below one it was told before, since it last (re)joined
   (consumer_members.py).
2. No partition is owned twice in a consumer group:
   - in the durable state: no partition is in two members' assigned or pending-revocation sets;
   - in what the clients believe they own (what they were told and have not revoked), among the
     clients the durable state holds as members (one it fenced or expired has not heard so yet; it
     will be told when it next heartbeats): no two of them believe they own one partition, and each
     believes it owns only what the coordinator holds for it (assigned, or pending its revocation).
     Except what a client took while a heartbeat of its own, sent during the reconciliation, went
     unanswered (`unconfirmed`, consumer_members.py): the coordinator may have let those go on
     that heartbeat, as Kafka's does, and the client's next answer fences it or confirms them.
     Such a window is counted, not judged.
3. A coordinator partition's leader, at rest (no batch applied and unwritten), holds exactly the
   durable state: its durable view (consumer groups, share groups, offsets) and its consumer groups'
   partition epochs equal those of the replayed log. And after a failover or a move, the new leader's
   state equals its predecessor's last state at rest, when the log did not grow in between.

What the seeds reach is counted in `counts` (the coverage test holds the world to it).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.consumer.group import ConsumerGroup
from coordinator.consumer.records import ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupMetadataKey
from coordinator.member_state import MemberState
from coordinator.records import CODEC
from coordinator.shard import GroupCoordinatorShard
from cluster.actors.group_coordinator import group_coordinator_config
from cluster.recordbatch import decode_records
from tests.sim.consumer_members import Phase
from tests.sim.harness import Violation

if TYPE_CHECKING:
    from tests.sim.coordinator_world import CoordinatorWorld


def holdings(member: Any) -> frozenset[tuple[Any, int]]:
    """What the coordinator holds for a member: assigned, or pending its revocation."""
    return frozenset(
        (t, p) for parts in (member.assigned_partitions, member.partitions_pending_revocation)
        for t, ps in parts.items() for p in ps
    )


class ConsumerChecks:
    # Each client believes it owns only what the coordinator holds for it (a test turns this off to
    # show that the weaker check, two clients believing they own one partition, finds bugs alone).
    beliefs_within_holdings = True

    def __init__(self, world: "CoordinatorWorld", partitions: tuple[tuple[str, int], ...]) -> None:
        self.world = world
        self.partitions = partitions
        config = group_coordinator_config(world.config)
        self.rebuilt = {tp: GroupCoordinatorShard(tp, world.clock, config=config) for tp in partitions}
        self.replayed = {tp: 0 for tp in partitions}
        self.rebuilt_view: dict[tuple[str, int], Any] = {}
        self.epochs: dict[tuple[str, str], int] = {}  # (group, member id) -> epoch of its last record
        # tp -> (the leader's partition object, its durable view at rest, the log's length then)
        self.at_rest: dict[tuple[str, int], tuple[Any, Any, int]] = {}
        self.counts: Counter[str] = Counter()

    def check(self) -> None:
        for tp in self.partitions:
            grew = self._replay_log(tp)
            if grew:
                self._owned_once_durably(tp)
            self._leader_holds_the_log(tp)
        self._beliefs()

    # -- 1. the log, as it grows ----------------------------------------------------------------------

    def _replay_log(self, tp: tuple[str, int]) -> bool:
        batches = self.world.disk.files.get(Path("/sim") / f"{tp[0]}-{tp[1]}", [])
        done = self.replayed[tp]
        if len(batches) == done:
            return False
        shard = self.rebuilt[tp]
        for batch in batches[done:]:
            for _offset, key, value in decode_records(batch):
                record = CODEC.decode(key, value)
                self._epoch_of(shard, record)
                try:
                    shard.replay(record)
                except Exception as exc:  # the log contradicts itself: no coordinator could load it
                    raise Violation(f"{tp[0]}-{tp[1]}: replaying {record} raised {exc!r}") from None
        self.replayed[tp] = len(batches)
        self.rebuilt_view.pop(tp, None)
        return True

    def _epoch_of(self, shard: GroupCoordinatorShard, record: Any) -> None:
        key = record.key
        if isinstance(key, ConsumerGroupMetadataKey) and record.value is None:
            for member in [m for m in self.epochs if m[0] == key.group_id]:
                del self.epochs[member]  # the group is gone: whoever comes back starts over
            return
        if not isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            return
        member = (key.group_id, key.member_id)
        if record.value is None:
            self._removed(shard, key)
            self.epochs.pop(member, None)
            return
        epoch = record.value.member_epoch
        if record.value.state == MemberState.UNREVOKED_PARTITIONS:
            self.counts["consumer revocations asked"] += 1
        elif record.value.state == MemberState.UNRELEASED_PARTITIONS:
            self.counts["consumer waits for unreleased partitions"] += 1
        last = self.epochs.get(member)
        if last is not None and epoch < last:
            name = self.world.consumer_name(key.member_id)
            raise Violation(f"{key.group_id}: {name}'s epoch went back from {last} to {epoch} in the log")
        self.epochs[member] = epoch

    def _removed(self, shard: GroupCoordinatorShard, key: ConsumerGroupCurrentMemberAssignmentKey) -> None:
        """Count why the member went: it left, or the coordinator fenced it (its session expired, or it
        did not revoke within its rebalance timeout)."""
        group = shard.groups.get(key.group_id)
        member = group.members.get(key.member_id) if isinstance(group, ConsumerGroup) else None
        client = self.world.consumer(key.member_id)
        if client is not None and client.phase is Phase.LEFT:
            self.counts["consumer leaves"] += 1
        elif member is not None and member.state is MemberState.UNREVOKED_PARTITIONS:
            self.counts["consumer members fenced while revoking"] += 1
        else:
            self.counts["consumer sessions expired"] += 1

    # -- 2. no partition owned twice --------------------------------------------------------------------

    def _owned_once_durably(self, tp: tuple[str, int]) -> None:
        for group_id, group in sorted(self.rebuilt[tp].groups.items()):
            if not isinstance(group, ConsumerGroup):
                continue
            owner: dict[tuple[Any, int], str] = {}
            for member_id in sorted(group.members):
                for partition in sorted(holdings(group.members[member_id])):
                    other = owner.setdefault(partition, member_id)
                    if other != member_id:
                        raise Violation(
                            f"{group_id}: {self.world.show_tp(partition)} is held by {self.world.consumer_name(other)} "
                            f"and {self.world.consumer_name(member_id)} in the durable state"
                        )

    def _beliefs(self) -> None:
        believers: dict[tuple[str, tuple[Any, int]], str] = {}
        for client in self.world.consumers:
            if not client.owned:
                continue
            group = self._durable_group(client.group)
            member = None if group is None else group.members.get(client.member_id)
            if member is None:
                continue  # fenced or expired, and not told yet: its next heartbeat will be
            self.counts["consumer beliefs checked"] += 1
            held = holdings(member)
            if client.unconfirmed - held and not client.window_seen:
                client.window_seen = True
                self.counts["consumer partitions taken after the coordinator let them go (Kafka's window)"] += 1
            believed = client.owned - client.unconfirmed
            for partition in sorted(believed):
                other = believers.setdefault((client.group, partition), client.name)
                if other != client.name:
                    raise Violation(f"{client.group}: {other} and {client.name} both believe they own {self.world.show_tp(partition)}")
            beyond = believed - held if self.beliefs_within_holdings else frozenset()
            if beyond:
                raise Violation(
                    f"{client.group}: {client.name} believes it owns {self.world.show(beyond)}, which the coordinator "
                    f"no longer holds for it (epoch {member.member_epoch}, {member.state.name})"
                )

    def _durable_group(self, group_id: str) -> ConsumerGroup | None:
        tp = self.world.partition_of(group_id)
        group = self.rebuilt[tp].groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    # -- 3. the leader holds the log; a failover replays the state before it ----------------------------

    def _leader_holds_the_log(self, tp: tuple[str, int]) -> None:
        partition = self.world.active_partition(tp)
        if partition is None or partition.shard is None or partition.shard.touched.open:
            return
        live = _view(partition.shard)
        logged = self.replayed[tp]
        before = self.at_rest.get(tp)
        if before is not None and before[0] is not partition:  # a new leader (a failover, a move, a reload)
            if any(isinstance(g, ConsumerGroup) and g.members for g in self.rebuilt[tp].groups.values()):
                self.counts["consumer-group failovers"] += 1
            if before[2] == logged:
                self.counts["failovers compared"] += 1
                if before[1] != live:
                    raise Violation(
                        f"{tp[0]}-{tp[1]}: after a failover the new leader holds {_diff(live, before[1], 'the old one')}"
                    )
        replayed = self.rebuilt_view.get(tp)
        if replayed is None:
            replayed = self.rebuilt_view[tp] = _view(self.rebuilt[tp])
        if live != replayed:
            raise Violation(f"{tp[0]}-{tp[1]}: the leader holds {_diff(live, replayed, 'the log')}")
        self.at_rest[tp] = (partition, live, logged)


def _view(shard: GroupCoordinatorShard) -> tuple[Any, Any]:
    consumer_epochs = {
        g: {t: dict(sorted(ps.items())) for t, ps in sorted(group.partition_epochs.items())}
        for g, group in sorted(shard.groups.items()) if isinstance(group, ConsumerGroup)
    }
    return shard.durable_view(), consumer_epochs


_GROUP_FIELDS = ("type", "state", "group epoch", "metadata hash", "target assignment epoch", "members",
                 "target assignment", "resolved regexes")
_MEMBER_FIELDS = ("member epoch", "previous member epoch", "state", "instance id", "rack id", "rebalance timeout",
                  "client id", "client host", "subscribed topics", "regex", "server assignor", "assigned",
                  "pending revocation")


def _diff(mine: tuple[Any, Any], other: tuple[Any, Any], theirs: str) -> str:
    """The first thing that differs between two views, for the message: `theirs` names the other."""
    (view, epochs), (view2, epochs2) = mine, other
    for group_id in sorted(set(view["groups"]) | set(view2["groups"])):
        a, b = view["groups"].get(group_id), view2["groups"].get(group_id)
        if a == b:
            continue
        if a is None or b is None or a[0] != "consumer" or b[0] != "consumer":
            return f"{group_id} as {a}, {theirs} as {b}"
        for name, x, y in zip(_GROUP_FIELDS, a, b):
            if x == y:
                continue
            if name != "members":
                return f"{group_id}'s {name} as {x}, {theirs} as {y}"
            xs, ys = dict(x), dict(y)
            for member_id in sorted(set(xs) | set(ys)):
                if xs.get(member_id) == ys.get(member_id):
                    continue
                if member_id not in xs or member_id not in ys:
                    return f"{group_id}'s member {member_id} as {xs.get(member_id)}, {theirs} as {ys.get(member_id)}"
                for field, u, v in zip(_MEMBER_FIELDS, xs[member_id], ys[member_id]):
                    if u != v:
                        return f"{group_id}'s member {member_id}'s {field} as {u}, {theirs} as {v}"
    if view["offsets"] != view2["offsets"]:
        return f"offsets {view['offsets']}, {theirs} {view2['offsets']}"
    return f"partition epochs {epochs}, {theirs} {epochs2}"
