"""LogReplica: three replicas of one partition on real logs in a temporary directory, the fetches
passed by hand. What the state machines decide must hold on the bytes: followers' logs equal the
leader's batch for batch (offsets and leader epochs kept), a new leader's followers cut exactly
the tail it never had, a wiped replica catches up, and a reopened log knows its epochs."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from cluster.log import PartitionLog
from cluster.recordbatch import BatchError, parse_header
from cluster.replication.log_replica import LogReplica, ReplicaFetched, ReplicationConfig
from cluster.replication.registration import PartitionRegistration, alter_partition, reassign, reconcile
from tests.unit.log_helpers import COMPACTED, SMALL, batch, one, split

CONFIG = ReplicationConfig(min_insync_replicas=2, lag_time_max_ms=1_000, fetch_max_bytes=1 << 20)
T0 = 1_000_000


class Trio:
    """Three replicas, their logs under tmp_path/<id>, and the controller's registration."""

    def __init__(self, tmp_path) -> None:
        self.tmp_path = tmp_path
        self.now = T0
        self.replicas = {r: self.open(r) for r in (0, 1, 2)}
        self.registration = PartitionRegistration.new((0, 1, 2))
        self.apply_all()

    def open(self, r: int, incarnation: int = 0) -> LogReplica:
        return LogReplica(r, incarnation, PartitionLog.open(self.tmp_path / str(r), SMALL), CONFIG)

    def apply_all(self) -> None:
        for replica in self.replicas.values():
            replica.apply(self.registration, self.now)

    def leader(self) -> LogReplica:
        return self.replicas[self.registration.leader]

    def produce(self, n: int = 1) -> int:
        """n one-record batches through the leader, acks=all; the end offset to wait for."""
        error, _, end, self.term = self.leader().append([one(i) for i in range(n)], None, acks_all=True,
                                                        now_ms=self.now)
        assert error is ErrorCode.none and end == self.leader().log.end_offset
        return end

    def fetch_once(self, r: int) -> ErrorCode:
        follower = self.replicas[r]
        fetch = follower.next_fetch()
        assert fetch is not None
        answer, change = self.replicas[self.registration.leader].answer_fetch(fetch, self.now)
        if change is not None:
            self.commit(change)
        return follower.apply_fetched(fetch, answer)

    def commit(self, change) -> None:
        alive = {r: rep.incarnation for r, rep in self.replicas.items()}
        self.registration, error = alter_partition(self.registration, change, alive)
        self.leader().leader.isr_change_answered(change, error, self.registration, self.now)

    def replicate(self, rounds: int = 6, only=(0, 1, 2)) -> None:
        for _ in range(rounds):
            for r in only:
                if r != self.registration.leader:
                    self.fetch_once(r)


def batches(replica: LogReplica) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch of a replica's log."""
    out = []
    for data in split(replica.log.read(0, 1 << 30)) if replica.log.end_offset else []:
        h = parse_header(data)
        out.append((h.base_offset, h.partition_leader_epoch, data))
    return out


def test_followers_hold_the_leaders_batches_and_the_high_watermark_follows(tmp_path):
    trio = Trio(tmp_path)
    end = trio.produce(3)
    assert trio.leader().acks_all_reached(end, trio.term) is None  # no follower has it yet
    trio.replicate()
    assert trio.leader().acks_all_reached(end, trio.term) is ErrorCode.none
    assert trio.leader().high_watermark == end
    assert batches(trio.replicas[1]) == batches(trio.replicas[0]) == batches(trio.replicas[2])
    assert trio.replicas[1].high_watermark == end


def test_a_new_leaders_followers_cut_the_tail_it_never_had(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(2)
    trio.replicate()
    committed = trio.leader().log.end_offset
    # The leader takes two more batches only follower 2 fetches, then dies before they commit.
    trio.produce(2)
    trio.fetch_once(2)
    assert trio.replicas[2].log.end_offset == committed + 2 and trio.replicas[1].log.end_offset == committed
    trio.registration = reconcile(trio.registration, alive={1, 2})
    assert trio.registration.leader == 1 and trio.registration.isr == (1, 2)
    trio.replicas[1].apply(trio.registration, trio.now)
    trio.replicas[2].apply(trio.registration, trio.now)
    assert trio.fetch_once(2) is ErrorCode.none  # answered with the diverging epoch: 2 truncates
    assert trio.replicas[2].log.end_offset == committed
    end = trio.produce(1)  # epoch 1's first batch, at the offset 2 held epoch 0's tail
    trio.replicate(only=(1, 2))
    assert trio.leader().acks_all_reached(end, trio.term) is ErrorCode.none
    assert batches(trio.replicas[1]) == batches(trio.replicas[2])
    assert [epoch for _, epoch, _ in batches(trio.replicas[2])][-1] == trio.registration.leader_epoch == 1


def test_a_wiped_replica_catches_up_and_rejoins(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(5)
    trio.replicate()
    trio.replicas[2].log.delete()
    trio.replicas[2] = trio.open(2, incarnation=1)
    assert trio.replicas[2].log.end_offset == 0
    trio.replicas[2].apply(trio.registration, trio.now)
    trio.replicate()
    assert batches(trio.replicas[2]) == batches(trio.replicas[0])


def test_a_reopened_log_knows_its_epochs(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(2)
    trio.replicate()
    trio.registration = reconcile(trio.registration, alive={1, 2})
    trio.apply_all()
    trio.produce(1)
    trio.replicate(only=(1, 2))
    before = trio.replicas[2].epochs.entries
    trio.replicas[2].log.close()
    reopened = trio.open(2)
    assert reopened.epochs.entries == before == trio.replicas[1].epochs.entries


def test_a_corrupt_replicated_batch_is_refused_and_appends_nothing(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(2)
    follower = trio.replicas[1]
    fetch = follower.next_fetch()
    answer, _ = trio.leader().answer_fetch(fetch, trio.now)
    damaged = bytearray(answer.records)
    damaged[-1] ^= 0xFF
    bad = ReplicaFetched(answer.error_code, answer.high_watermark, answer.log_start_offset, records=bytes(damaged))
    with pytest.raises(BatchError):
        follower.apply_fetched(fetch, bad)
    assert follower.log.end_offset == 0
    assert follower.apply_fetched(fetch, answer) is ErrorCode.none  # that fetch is spent: dropped
    assert follower.log.end_offset == 0
    assert trio.fetch_once(1) is ErrorCode.none  # the next fetch brings the batches whole
    assert follower.log.end_offset == 2


def test_a_stale_answer_is_dropped(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(1)
    follower = trio.replicas[1]
    fetch = follower.next_fetch()
    answer, _ = trio.leader().answer_fetch(fetch, trio.now)
    assert follower.apply_fetched(fetch, answer) is ErrorCode.none
    end = follower.log.end_offset
    assert follower.apply_fetched(fetch, answer) is ErrorCode.none  # the same answer again: nothing
    assert follower.log.end_offset == end


def test_acks_all_is_refused_with_too_small_an_isr(tmp_path):
    trio = Trio(tmp_path)
    trio.now += CONFIG.lag_time_max_ms + 1
    trio.produce(1)
    change = trio.leader().leader.maybe_shrink_isr(trio.now)
    assert change is not None and change.new_isr == (0,)
    trio.commit(change)
    error, offsets, _, _ = trio.leader().append([one(9)], None, acks_all=True, now_ms=trio.now)
    assert error is ErrorCode.not_enough_replicas and offsets == []
    assert trio.leader().append([one(9)], None, acks_all=False, now_ms=trio.now)[0] is ErrorCode.none


def test_a_follower_cannot_append_as_leader(tmp_path):
    trio = Trio(tmp_path)
    error, _, _, _ = trio.replicas[1].append([one(1)], None, acks_all=True, now_ms=trio.now)
    assert error is ErrorCode.not_leader_or_follower


def test_a_write_cut_while_its_replica_followed_is_not_acknowledged_when_it_leads_again(tmp_path):
    """The review's case: a leader demoted, its unreplicated write truncated, then elected again
    must not report that write acknowledged when the high watermark passes its offset."""
    trio = Trio(tmp_path)
    trio.produce(1)
    trio.replicate()
    end = trio.produce(1)  # only 0 has it
    term = trio.term
    trio.registration = reconcile(trio.registration, alive={1, 2})
    trio.apply_all()  # 1 leads; 0 follows and will cut its tail
    trio.produce(2)
    trio.replicate(only=(0, 1, 2))
    trio.registration = reconcile(reconcile(trio.registration, alive={0, 2}), alive={0, 2})
    trio.apply_all()
    assert trio.registration.leader == 0
    trio.produce(1)
    trio.replicate(only=(0, 2))
    assert trio.leader().high_watermark >= end
    assert trio.leader().acks_all_reached(end, term) is ErrorCode.not_leader_or_follower


def test_an_older_registration_is_ignored(tmp_path):
    trio = Trio(tmp_path)
    old = trio.registration
    trio.registration = reconcile(trio.registration, alive={1, 2})
    trio.apply_all()
    trio.replicas[0].apply(old, trio.now)  # overtaken push: 0 led epoch 0
    assert trio.replicas[0].leader is None and trio.replicas[0].follower.leader == 1


def test_the_epoch_history_outlives_a_compaction_that_drops_an_epochs_first_batch(tmp_path):
    """The review's case: compaction removes the batch an epoch started with; the batch headers
    would then date the epoch later (or lose it), the checkpoint keeps it."""
    path = tmp_path / "compacted"
    replica = LogReplica(0, 0, PartitionLog.open(path, COMPACTED), CONFIG)
    replica.apply(PartitionRegistration((0,), (0,), 0, 3, 0), T0)
    replica.append([batch([(b"x", b"1")])], None, acks_all=False, now_ms=T0)  # epoch 3 at 0
    replica.apply(PartitionRegistration((0,), (0,), 0, 4, 1), T0)
    replica.append([batch([(b"y", b"1")])], None, acks_all=False, now_ms=T0)  # epoch 4 starts at 1
    for i in range(40):  # supersede y@1 and roll segments so compaction has closed ones to clean
        replica.append([batch([(b"y", b"%d" % i)])], None, acks_all=False, now_ms=T0)
    history = replica.epochs.entries
    assert [(e.epoch, e.start_offset) for e in history] == [(3, 0), (4, 1)]
    replica.log.compact(T0)
    headers = [(h.partition_leader_epoch, h.base_offset) for h in replica.log.batch_headers()]
    assert (4, 1) not in headers  # the batch epoch 4 began with is gone
    replica.log.close()
    reopened = LogReplica(0, 0, PartitionLog.open(path, COMPACTED), CONFIG)
    assert reopened.epochs.entries == history


def test_epochs_appended_after_the_checkpoints_last_write_are_read_back_from_the_headers(tmp_path):
    trio = Trio(tmp_path)
    trio.produce(2)
    trio.replicate()
    follower = trio.replicas[1]
    follower.log.write_epoch_history([])  # as if the process died before writing the new epoch
    follower.log.close()
    reopened = trio.open(1)
    assert [(e.epoch, e.start_offset) for e in reopened.epochs.entries] == [(0, 0)]


def test_a_leader_that_leads_again_under_a_new_epoch_without_following_still_answers_acks_all(tmp_path):
    """A reassignment can bump the epoch while the same replica leads: nothing was cut, so a
    write waiting for acks=all is still answered (Kafka keeps such a delayed produce)."""
    trio = Trio(tmp_path)
    end = trio.produce(1)
    term = trio.term
    moved, _ = reassign(trio.registration, (0, 1), {0: 0, 1: 0, 2: 0})
    trio.registration = moved
    trio.apply_all()
    assert trio.registration.leader == 0 and trio.registration.leader_epoch == 1
    trio.replicate(only=(0, 1))
    assert trio.leader().acks_all_reached(end, term) is ErrorCode.none


def test_a_stale_epoch_checkpoint_is_rewritten_when_the_log_opens(tmp_path):
    """The review's case: the checkpoint names an epoch past the log end (a crash between a cut and
    the checkpoint's rewrite); open must cut it in the file too, or a later crash brings it back."""
    trio = Trio(tmp_path)
    trio.produce(2)
    trio.replicate()
    follower = trio.replicas[2]
    follower.log.write_epoch_history([(0, 0), (3, 2)])  # epoch 3 at the log end: no batch of it
    follower.log.close()
    reopened = trio.open(2)
    assert [(e.epoch, e.start_offset) for e in reopened.epochs.entries] == [(0, 0)]
    assert reopened.log.read_epoch_history() == [(0, 0)]
