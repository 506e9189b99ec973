"""SharePartition under random acquires, acknowledgements, lock expiries, failed writes and recoveries.

Invariants after every step:
- a record is never held by two members at once (acquire never hands out what someone holds);
- no delivery count exceeds group.share.delivery.count.limit;
- with no write in flight, a partition rebuilt from the durable state (what the share coordinator
  stored from every committed write) agrees with the live one: same start offset, same terminal
  and released records; a held record is either unknown there or stored as before its delivery.
"""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kernel.clock import ManualClock
from kernel.timer import ManualTimer
from sharestate.inflight import AcknowledgeType, RecordState
from sharestate.records import StateBatch
from sharestate.partition import AcknowledgementBatch, SharePartition, SharePartitionConfig, StateWrite

LIMIT = 3
MEMBERS = ("m1", "m2", "m3")
CONFIG = SharePartitionConfig(record_lock_duration_ms=1_000, delivery_count_limit=LIMIT, max_inflight_records=40)


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(0)
        self.timer = ManualTimer(self.clock)
        self.log_end = 0  # offsets [0, log_end) exist in the log
        self.durable_start = 0
        self.durable: dict[int, tuple[int, int]] = {}
        self.pending: list[StateWrite] = []
        self.held: dict[int, str] = {}
        self.sp = self._recovered()

    # -- the durable store: what the share coordinator keeps of each committed write -------------

    def _store(self, write: StateWrite | None) -> None:
        if write is None:
            return
        for b in write.batches:
            for offset in range(b.first_offset, b.last_offset + 1):
                self.durable[offset] = (b.delivery_state, b.delivery_count)
        self.durable_start = max(self.durable_start, write.start_offset)
        self.durable = {o: v for o, v in self.durable.items() if o >= self.durable_start}

    def _recovered(self) -> SharePartition:
        sp = SharePartition("g", uuid.UUID(int=1), 0, clock=self.clock, timer=ManualTimer(self.clock), config=CONFIG)
        batches = [StateBatch(o, o, s, c) for o, (s, c) in sorted(self.durable.items())]
        sp.initialize(self.durable_start, 1, batches, reset_offset=0)
        return sp

    def _forget_released(self) -> None:
        live = self.sp.offsets()
        self.held = {o: m for o, m in self.held.items() if live.get(o, (None,))[0] is RecordState.ACQUIRED and live[o][2] == m}

    # -- rules -----------------------------------------------------------------------------------

    @rule(n=st.integers(1, 12))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 15), batch=st.integers(1, 4))
    def acquire(self, member: str, max_records: int, batch: int) -> None:
        start = self.sp.next_fetch_offset()
        if start >= self.log_end:
            return
        # The log as Fetch reads it: batches from the one holding the fetch offset.
        base = start - start % batch
        log = [(b, min(b + batch - 1, self.log_end - 1)) for b in range(base, self.log_end, batch)]
        for got in self.sp.acquire(member, max_records, start, log):
            assert got.delivery_count <= LIMIT
            for offset in range(got.first_offset, got.last_offset + 1):
                assert offset not in self.held, f"offset {offset} handed to {member} while {self.held[offset]} holds it"
                self.held[offset] = member

    @rule(
        member=st.sampled_from(MEMBERS),
        pick=st.integers(0, 100),
        width=st.integers(1, 4),
        kind=st.sampled_from(list(AcknowledgeType)),
        per_offset=st.booleans(),
        own=st.booleans(),
    )
    def acknowledge(self, member: str, pick: int, width: int, kind: AcknowledgeType, per_offset: bool, own: bool) -> None:
        mine = sorted(o for o, m in self.held.items() if m == member) if own else sorted(self.held)
        if not mine:
            return
        first = mine[pick % len(mine)]
        last = first + width - 1
        types = tuple(int(kind) for _ in range(width)) if per_offset else (int(kind),)
        outcome = self.sp.acknowledge(member, [AcknowledgementBatch(first, last, types)])
        if outcome.write is not None:
            self.pending.append(outcome.write)

    @rule(index=st.integers(0, 10), succeed=st.booleans())
    def write_answered(self, index: int, succeed: bool) -> None:
        if not self.pending:
            return
        write = self.pending.pop(index % len(self.pending))
        if succeed:
            self._store(write)
        follow_up = self.sp.complete(write.transition, succeed)
        self._store(follow_up)
        self._forget_released()

    @rule(ms=st.sampled_from((100, 500, 1_000, 2_500)))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while (due := self.sp.timer.pop_expired()) is not None:
            self._store(due[1]())
        self._forget_released()

    @rule(member=st.sampled_from(MEMBERS))
    def session_closes(self, member: str) -> None:
        self._store(self.sp.release_member(member))
        self._forget_released()

    @rule()
    def leader_fails_over(self) -> None:
        # Writes in flight are lost with the leader; what was stored is what the new leader reads.
        self.pending.clear()
        self.sp = self._recovered()
        self.held.clear()

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def delivery_counts_stay_within_the_limit(self) -> None:
        assert all(count <= LIMIT for _, count, _ in self.sp.offsets().values())

    @invariant()
    def the_durable_state_rebuilds_the_live_one(self) -> None:
        if self.pending:
            return
        rebuilt = self._recovered()
        assert rebuilt.start_offset == self.sp.start_offset
        again = rebuilt.offsets()
        for offset, (state, count, _) in self.sp.offsets().items():
            if state is RecordState.ACQUIRED:
                assert offset not in again or again[offset][:2] == (RecordState.AVAILABLE, count - 1), offset
            else:
                assert again.get(offset, (None, None))[:2] == (state, count), (offset, state, count, again.get(offset))


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
