"""The share side's invariants, checked at rest (no I/O pending, every answer delivered).

- The durable share state (the shard in memory) equals what replaying its log rebuilds.
- No delivery count above group.share.delivery.count.limit, in memory or durably.
- What a successful ACCEPT or REJECT made done stays done: durably (below the start offset or in
  a terminal batch) and in the serving share partition, across any crash (its redelivery is
  caught when a member is told of it, in share_world.py).
- A record seen ACKNOWLEDGED/ARCHIVED never becomes AVAILABLE again: in one host, and durably.
- A host initialized from the durable state reflects it: what was terminal there is terminal.
- Once a host's last write was answered success, the durable start offset and delivery-complete
  count are the share partition's own.
- At a session close, what the member held comes back AVAILABLE with its delivery given back
  (KAFKA-17541), checked when it happens.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from cluster.recordbatch import decode_records
from sharestate.coordinator_shard import ShareCoordinatorShard, SharePartitionKey
from sharestate.inflight import RecordState
from sharestate.records import CODEC
from tests.sim.harness import Violation

if TYPE_CHECKING:
    from tests.sim.share_world import ShareWorld

TERMINAL = (RecordState.ACKNOWLEDGED.value, RecordState.ARCHIVED.value)


def held_states(host: Any, member: str) -> dict[int, int]:
    """offset -> delivery count of what the member holds (ACQUIRED, no write pending)."""
    if host is None or not host.active:
        return {}
    sp = host.share
    return {  # at or after the start offset: those before it are done, whatever their state says
        offset: state.delivery_count
        for first in sp.firsts
        for f, l, state in sp.cached_state[first].states()
        if state.state is RecordState.ACQUIRED and state.member_id == member and not state.in_transition
        for offset in range(max(f, sp.start_offset), l + 1)
    }


def released_with_delivery_given_back(host: Any, tpi: int, held: dict[int, int]) -> None:
    if not held:
        return
    now = host.share.offsets()
    for offset, count in held.items():
        state = now.get(offset)
        if state is None or state[0] is not RecordState.AVAILABLE or state[1] != count - 1:
            raise Violation(
                f"p{tpi} offset {offset} held at delivery {count} by a closed session is {state}, "
                f"not AVAILABLE at delivery {count - 1} (KAFKA-17541)"
            )


class State:
    """What the checks remember between steps."""

    def __init__(self, world: "ShareWorld") -> None:
        self.world = world
        self.rebuilt = ShareCoordinatorShard(("__share_group_state", 0), world.clock, world.shard_config)
        self.replayed = 0  # batches of the log replayed into `rebuilt` (the memory log only grows)
        self.durable_terminal: list[set[int]] = []
        self.durable_start: list[int] = []
        self.host_terminal: dict[int, tuple[Any, set[int]]] = {}  # id(host) -> (host, offsets seen done)

    def at_rest(self) -> None:
        w = self.world
        from tests.sim.share_world import DELIVERY_LIMIT, GROUP, TOPICS  # noqa: PLC0415 (a cycle otherwise)

        if not self.durable_start:
            self.durable_terminal = [set() for _ in TOPICS]
            self.durable_start = [-1 for _ in TOPICS]
        shard = w.runtime.shard(("__share_group_state", 0))
        self._replay_log(shard)
        for tpi, (topic, p, topic_id) in enumerate(TOPICS):
            durable = shard.state_of(SharePartitionKey(GROUP, topic_id, p))
            self._durable(tpi, durable, DELIVERY_LIMIT)
            host = w.host(tpi)
            if host is not None and host.active:
                self._host(tpi, host, durable, DELIVERY_LIMIT)

    def _replay_log(self, shard: ShareCoordinatorShard) -> None:
        w = self.world
        batches = w.disk.files.get(Path("/sim") / "__share_group_state-0", [])
        for batch in batches[self.replayed:]:
            for _offset, key, value in decode_records(batch):
                self.rebuilt.replay(CODEC.decode(key, value))
        self.replayed = len(batches)
        live, replayed = shard.durable_view(), self.rebuilt.durable_view()
        if live != replayed:
            raise Violation(f"share state in memory {live} != replayed from the log {replayed}")

    def _durable(self, tpi: int, durable: Any, limit: int) -> None:
        done = self.world.ledger.done[tpi]
        if durable is None:
            if done:
                raise Violation(f"p{tpi}: the durable state is gone, done offsets {sorted(done)[:10]} with it")
            return
        if durable.start_offset < self.durable_start[tpi]:
            raise Violation(f"p{tpi}: durable start offset went back from {self.durable_start[tpi]} to {durable.start_offset}")
        self.durable_start[tpi] = durable.start_offset
        terminal = set()
        for b in durable.state_batches:
            if b.delivery_count > limit:
                raise Violation(f"p{tpi}: durable {b} above the delivery limit {limit}")
            if b.delivery_state in TERMINAL:
                terminal.update(range(b.first_offset, b.last_offset + 1))
        for offset in sorted(done | self.durable_terminal[tpi]):
            if offset >= durable.start_offset and offset not in terminal:
                what = "acknowledged with success" if offset in done else "seen done durably before"
                raise Violation(f"p{tpi} offset {offset} ({what}) is not done in the durable state {durable}")
        self.durable_terminal[tpi] = {o for o in terminal if o >= durable.start_offset}

    def _host(self, tpi: int, host: Any, durable: Any, limit: int) -> None:
        sp = host.share
        offsets = sp.offsets()
        for offset, (state, count, member) in offsets.items():
            if count > limit:
                raise Violation(f"p{tpi} offset {offset} is {state.name} at delivery {count}, above the limit {limit}")
        seen = self.host_terminal.get(id(host))
        if seen is None:
            seen = (host, self._initial_terminal(tpi, host))
            self.host_terminal[id(host)] = seen
        for offset in sorted(self.world.ledger.done[tpi] | seen[1]):
            if offset < sp.start_offset:
                continue
            state = offsets.get(offset)
            if state is None or not state[0].terminal:
                raise Violation(f"p{tpi} offset {offset} was done and is {state} in the share partition (start {sp.start_offset})")
        seen[1].clear()
        seen[1].update(o for o, (state, _, _) in offsets.items() if state.terminal and not _pending(sp, o))
        self._in_sync(tpi, host, durable)

    def _initial_terminal(self, tpi: int, host: Any) -> set[int]:
        """What the host's ReadShareGroupState answered done: it must be done in the host too."""
        key = host.key
        for request, answer in reversed(self.world.persister.reads):
            if (request.group_id, request.partition) == (key[0], key[2]) and request.leader_epoch == host.leader_epoch:
                if answer.error_code == ErrorCode.none:
                    start = answer.start_offset
                    return {
                        o for b in answer.state_batches if b.delivery_state in TERMINAL
                        for o in range(max(b.first_offset, start), b.last_offset + 1)
                    }
        return set()

    def _in_sync(self, tpi: int, host: Any, durable: Any) -> None:
        sp = host.share
        if durable is None or host.writes.sending or sp.pending:
            return
        key = host.key
        last = None
        for request, answer in self.world.persister.writes:
            if (request.group_id, request.partition) == (key[0], key[2]) and request.leader_epoch == host.leader_epoch:
                last = answer
        if last is None or last.error_code != ErrorCode.none:
            return
        if durable.start_offset != sp.start_offset:
            raise Violation(f"p{tpi}: durable start offset {durable.start_offset}, the share partition's {sp.start_offset}")
        expected = sp.delivery_complete_count()
        if durable.delivery_complete_count != expected:
            raise Violation(
                f"p{tpi}: durable delivery-complete count {durable.delivery_complete_count}, the share partition "
                f"has {expected} done from {sp.start_offset}"
            )


def _pending(sp: Any, offset: int) -> bool:
    batch = sp.batch_at(offset)
    if batch is None:
        return False
    for f, l, state in batch.states():
        if f <= offset <= l:
            return state.in_transition
    return False
