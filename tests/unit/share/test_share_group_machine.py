"""Random share-group joins, heartbeats, leaves, subscription changes, share-state initializations, topic
changes and clock jumps against one group coordinator shard.

Invariants after every step:
- a share group's epoch never decreases (while the group exists), and its assignment epoch and every
  member's epoch are at most the group epoch;
- a member only holds initialized partitions of topics it subscribes to (topics that still exist:
  after a topic is deleted its members drop it on their next heartbeat);
- replaying the durable records written so far rebuilds equal share groups;
and, after every member has heartbeated (`settle`): every initialized partition of a subscribed topic
is assigned to at least one member.
"""

from __future__ import annotations

from uuid import UUID

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode

from coordinator.share.group import ShareGroup
from tests.unit.share.context import ShareContext, topic

GROUPS = ("g1", "g2")
MEMBERS = ("m1", "m2", "m3", "m4", "m5")
TOPIC_NAMES = ("foo", "bar", "zed")
subscriptions = st.sets(st.sampled_from(TOPIC_NAMES), min_size=1).map(sorted)


class ShareGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = ShareContext(share_max_size=4, share_session_timeout_ms=45_000, share_initialize_retry_interval_ms=30_000)
        self.topics = {"foo": topic("foo", 2), "bar": topic("bar", 1)}
        self.ctx.set_topics(*self.topics.values())
        self.next_topic_id = 1
        self.epochs: dict[str, int] = {}

    # -- helpers ------------------------------------------------------------------------------------

    def _group(self, group_id: str) -> ShareGroup | None:
        group = self.ctx.group(group_id)
        return group if isinstance(group, ShareGroup) else None

    def _beat(self, group_id: str, member_id: str, topics=None) -> None:
        group = self._group(group_id)
        if group is None or member_id not in group.members:
            return
        epoch = group.members[member_id].member_epoch
        outcome = self.ctx.heartbeat(member_id, epoch, topics, group_id=group_id)
        assert outcome.response.error_code == ErrorCode.none, outcome
        assert outcome.response.member_epoch >= epoch

    # -- members ------------------------------------------------------------------------------------

    @rule(group_id=st.sampled_from(GROUPS), member_id=st.sampled_from(MEMBERS), topics=subscriptions)
    def join(self, group_id: str, member_id: str, topics: list[str]) -> None:
        group = self._group(group_id)
        full = group is not None and len(group.members) >= 4 and member_id not in group.members
        response = self.ctx.join(member_id, topics, group_id=group_id).response
        if full:
            assert response.error_code == ErrorCode.group_max_size_reached
            event("group full")
        else:
            assert response.error_code == ErrorCode.none, response
            assert response.assignment is not None

    @rule(group_id=st.sampled_from(GROUPS), member_id=st.sampled_from(MEMBERS))
    def heartbeat(self, group_id: str, member_id: str) -> None:
        self._beat(group_id, member_id)

    @rule(group_id=st.sampled_from(GROUPS), member_id=st.sampled_from(MEMBERS), topics=subscriptions)
    def change_subscription(self, group_id: str, member_id: str, topics: list[str]) -> None:
        self._beat(group_id, member_id, topics)

    @rule(group_id=st.sampled_from(GROUPS), member_id=st.sampled_from(MEMBERS), ahead=st.booleans())
    def fenced_heartbeat(self, group_id: str, member_id: str, ahead: bool) -> None:
        group = self._group(group_id)
        if group is None or member_id not in group.members:
            return
        m = group.members[member_id]
        epoch = m.member_epoch + 1 if ahead else m.member_epoch - 1
        if epoch in (0, -1, m.previous_member_epoch) or epoch < -1:
            return
        self.ctx.take_written()
        response = self.ctx.heartbeat(member_id, epoch, group_id=group_id).response
        assert response.error_code == ErrorCode.fenced_member_epoch
        assert self.ctx.take_written() == []

    @rule(group_id=st.sampled_from(GROUPS), member_id=st.sampled_from(MEMBERS))
    def leave(self, group_id: str, member_id: str) -> None:
        group = self._group(group_id)
        known = group is not None and member_id in group.members
        response = self.ctx.leave(member_id, group_id=group_id).response
        expected = ErrorCode.none if known else (ErrorCode.unknown_member_id if group else ErrorCode.group_id_not_found)
        assert response.error_code == expected

    @rule(group_id=st.sampled_from(GROUPS))
    def delete_group(self, group_id: str) -> None:
        group = self._group(group_id)
        (deleted,) = self.ctx.run(self.ctx.shard.delete_groups((group_id,)))
        if group is None:
            assert deleted.error_code == ErrorCode.group_id_not_found
        elif group.members:
            assert deleted.error_code == ErrorCode.non_empty_group
        else:
            assert deleted.error_code == ErrorCode.none and self._group(group_id) is None
            self.epochs.pop(group_id, None)
            self.ctx.pending_inits = [i for i in self.ctx.pending_inits if i.group_id != group_id]

    # -- the cluster's part ---------------------------------------------------------------------------

    @rule(data=st.data())
    def answer_initializations(self, data) -> None:
        pending = self.ctx.pending_inits
        if not pending:
            return
        chosen = data.draw(st.lists(st.sampled_from(range(len(pending))), unique=True, max_size=len(pending)))
        fail = data.draw(st.booleans())
        answered = [pending[i] for i in sorted(chosen)]
        self.ctx.pending_inits = [p for i, p in enumerate(pending) if i not in set(chosen)]
        self.ctx.initialize(answered, ErrorCode.coordinator_not_available if fail else ErrorCode.none)

    @rule()
    def lose_initializations(self) -> None:
        self.ctx.pending_inits = []

    @rule(ms=st.sampled_from((0, 1_000, 10_000, 31_000, 46_000)))
    def advance_clock(self, ms: int) -> None:
        self.ctx.advance(ms)

    @rule(name=st.sampled_from(TOPIC_NAMES), more=st.integers(min_value=1, max_value=2))
    def add_partitions_or_create(self, name: str, more: int) -> None:
        current = self.topics.get(name)
        if current is None:
            self.topics[name] = topic(name, more, UUID(int=0x1000 + self.next_topic_id))
            self.next_topic_id += 1
        else:
            self.topics[name] = topic(name, current.partitions + more, current.topic_id)
        self.ctx.set_topics(*self.topics.values())

    @rule(name=st.sampled_from(TOPIC_NAMES))
    def delete_topic(self, name: str) -> None:
        if self.topics.pop(name, None) is not None:
            self.ctx.set_topics(*self.topics.values())

    def _beat_all(self) -> None:
        for group_id in GROUPS:
            group = self._group(group_id)
            for member_id in list(group.members) if group else []:
                self._beat(group_id, member_id)

    @rule(answer=st.booleans())
    def settle(self, answer: bool) -> None:
        """Every member heartbeats (twice, with the cluster answering initializations in between if
        `answer`); then every initialized partition of a subscribed topic is assigned."""
        for _ in range(2):
            if answer:
                self.ctx.initialize()
            self._beat_all()
        self._beat_all()
        image = self.ctx.shard.topics_image
        for group_id in GROUPS:
            group = self._group(group_id)
            if group is None or not group.members or group.share_state is None:
                continue
            subscribed = group.subscribed_topic_names()
            held: set[tuple[UUID, int]] = set()
            for m in group.members.values():
                held |= {(tid, p) for tid, ps in m.assigned_partitions.items() for p in ps}
            for tid, value in group.share_state.initialized.items():
                t = image.by_id.get(tid)
                if t is None or t.name not in subscribed:
                    continue
                for p in value.partitions:
                    if p < t.partitions:
                        assert (tid, p) in held, (group_id, t.name, p)
                        event("initialized partition checked")

    # -- invariants ----------------------------------------------------------------------------------

    @invariant()
    def epochs_only_grow(self) -> None:
        for group_id in GROUPS:
            group = self._group(group_id)
            if group is None:
                self.epochs.pop(group_id, None)
                continue
            assert group.group_epoch >= self.epochs.get(group_id, 0)
            self.epochs[group_id] = group.group_epoch
            assert group.assignment_epoch <= group.group_epoch
            for m in group.members.values():
                assert m.member_epoch <= group.group_epoch

    @invariant()
    def members_hold_only_initialized_subscribed_partitions(self) -> None:
        image = self.ctx.shard.topics_image
        for group_id in GROUPS:
            group = self._group(group_id)
            if group is None:
                continue
            initialized = group.share_state.initialized if group.share_state else {}
            for m in group.members.values():
                for tid, ps in m.assigned_partitions.items():
                    t = image.by_id.get(tid)
                    if t is None:
                        continue  # deleted topic: dropped on the member's next heartbeat
                    assert t.name in m.subscribed_topic_names
                    assert tid in initialized and ps <= initialized[tid].partitions

    @invariant()
    def replay_rebuilds_equal_share_groups(self) -> None:
        fresh = self.ctx.replayed()
        live = {g: v for g, v in self.ctx.shard.durable_view()["groups"].items() if v[0] == "share"}
        rebuilt = {g: v for g, v in fresh.durable_view()["groups"].items() if v[0] == "share"}
        assert rebuilt == live


TestShareGroupMachine = ShareGroupMachine.TestCase
TestShareGroupMachine.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
