"""The follower's side against Kafka's AbstractFetcherThread (and AbstractFetcherThreadTest)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from cluster.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from cluster.replication.follower import FetchPosition, FollowerState
from cluster.replication.leader import LeaderState
from cluster.replication.registration import PartitionRegistration

LEADER_EPOCH = 5


def follower(batches=((0, 0), (2, 1), (4, 2)), *, log_start=0, log_end=3, hw=0, leader_epoch=LEADER_EPOCH) -> FollowerState:
    """Replica 2 following replica 1; `batches` are (partition leader epoch, base offset) of its log."""
    epochs = LeaderEpochCache.from_batches(batches)
    return FollowerState(2, 1, leader_epoch, epochs, log_start, log_end, hw)


def entries(state: FollowerState) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in state.epochs.entries]


# -- position / take ---------------------------------------------------------------------------


def test_position_fetches_from_the_log_end_with_the_last_epoch_held():
    assert follower().position() == FetchPosition(3, 4, LEADER_EPOCH)


def test_position_of_an_empty_log_has_no_last_fetched_epoch():
    state = follower(batches=(), log_end=0)
    assert state.position() == FetchPosition(0, UNDEFINED_EPOCH, LEADER_EPOCH)


def test_takes_the_answer_to_the_fetch_in_flight_once():
    state = follower()
    sent = state.start_fetch()
    assert sent == FetchPosition(3, 4, LEADER_EPOCH, 1)
    assert state.take(sent)
    assert not state.take(sent)  # a duplicate of the same answer


def test_drops_the_answer_to_a_fetch_sent_before_the_one_in_flight():
    state = follower()
    first = state.start_fetch()
    second = state.start_fetch()  # sent again after a timeout: same position, a new fetch
    assert (first.fetch_offset, first.last_fetched_epoch) == (second.fetch_offset, second.last_fetched_epoch)
    assert not state.take(first)
    assert state.take(second)


def test_a_position_that_was_never_sent_is_not_taken():
    state = follower()
    assert not state.take(state.position())


def test_drops_an_answer_sent_under_another_leader_epoch():
    state = follower()
    sent = state.start_fetch()
    state.leader_epoch += 1
    assert not state.take(sent)


def test_drops_an_answer_sent_from_an_offset_the_log_has_left():
    state = follower()
    sent = state.start_fetch()
    state.appended([(4, 3, 4)], 0)
    assert not state.take(sent)
    sent = state.start_fetch()
    state.truncated(2)
    assert not state.take(sent)


def test_a_stale_diverging_answer_cannot_cut_a_refilled_log():
    """The review's case: truncate on a diverging answer, refill to the same offset, then a second
    copy of that diverging answer arrives. It must be dropped."""
    state = follower()
    sent = state.start_fetch()
    assert state.take(sent)
    state.truncated(2)
    state.appended([(LEADER_EPOCH, 2, 2)], 3)  # refilled to offset 3, as `sent` was
    assert state.log_end_offset == sent.fetch_offset
    assert not state.take(sent)


def test_initial_high_watermark_is_capped_at_the_log_end():
    assert follower(log_end=3, hw=9).high_watermark == 3


# -- truncation_offset (getOffsetTruncationState) -------------------------------------------------


def test_truncation_with_an_undefined_end_offset_goes_to_the_high_watermark():
    state = follower(hw=2)
    assert state.truncation_offset(UNDEFINED_EPOCH, UNDEFINED_OFFSET) == 2
    assert state.truncation_offset(3, UNDEFINED_OFFSET) == 2


def test_truncation_with_an_undefined_epoch_goes_to_the_leaders_end_offset():
    state = follower()
    assert state.truncation_offset(UNDEFINED_EPOCH, 1) == 1


def test_truncation_with_an_undefined_epoch_never_passes_the_log_end():
    state = follower()
    assert state.truncation_offset(UNDEFINED_EPOCH, 9) == 3


def test_truncation_for_a_shared_epoch_goes_to_the_earlier_end():
    # AbstractFetcherThreadTest.testDivergingEpochs: the leader ends epoch 2 at 2, and so does this log.
    assert follower().truncation_offset(2, 2) == 2


def test_truncation_for_a_shared_epoch_uses_the_leaders_end_when_it_is_earlier():
    state = follower(batches=((0, 0), (2, 1)), log_end=5)
    assert state.truncation_offset(2, 3) == 3


def test_truncation_for_a_shared_epoch_uses_this_logs_end_when_it_is_earlier():
    state = follower(batches=((0, 0), (2, 1), (4, 3)), log_end=6)
    assert state.truncation_offset(2, 5) == 3


def test_truncation_for_an_epoch_this_log_lacks_goes_to_its_floor_epochs_end():
    # The leader's epoch 3 is unknown here: cut where this log's epoch 2 ends, and ask again.
    assert follower().truncation_offset(3, 2) == 2
    assert follower().truncation_offset(1, 1) == 1


def test_truncation_for_an_epoch_below_this_logs_epochs_goes_to_the_leaders_end():
    state = follower(batches=((3, 0), (4, 2)), log_end=4)
    assert state.truncation_offset(1, 1) == 0


def test_truncation_with_an_empty_epoch_cache_goes_to_the_leaders_end():
    state = follower(batches=(), log_end=4)
    assert state.truncation_offset(2, 1) == 1
    assert state.truncation_offset(2, 9) == 4


def test_truncation_never_passes_the_log_end():
    assert follower().truncation_offset(4, 10) == 3


# -- truncated ------------------------------------------------------------------------------------


def test_truncated_cuts_epochs_log_end_and_high_watermark():
    state = follower(hw=3)
    state.truncated(2)
    assert entries(state) == [(0, 0), (2, 1)]
    assert state.log_end_offset == 2
    assert state.high_watermark == 2
    assert state.position() == FetchPosition(2, 2, LEADER_EPOCH)


def test_truncated_keeps_a_lower_high_watermark():
    state = follower(hw=1)
    state.truncated(2)
    assert state.high_watermark == 1


# -- appended --------------------------------------------------------------------------------------


def test_appended_assigns_new_epochs_and_moves_the_log_end():
    state = follower()
    state.appended([(4, 3, 4), (5, 5, 7), (5, 8, 8)], 6)
    assert entries(state) == [(0, 0), (2, 1), (4, 2), (5, 5)]
    assert state.log_end_offset == 9
    assert state.high_watermark == 6
    assert state.position() == FetchPosition(9, 5, LEADER_EPOCH)


def test_appended_caps_the_high_watermark_at_the_log_end():
    state = follower()
    state.appended([(5, 3, 4)], 20)
    assert state.high_watermark == 5


def test_appended_keeps_the_high_watermark_at_least_at_the_log_start():
    state = follower(batches=(), log_start=7, log_end=7, hw=7)
    state.appended([(5, 7, 8)], 0)
    assert state.high_watermark == 7


def test_appended_nothing_still_takes_the_leaders_high_watermark():
    state = follower(hw=0)
    state.appended([], 2)
    assert state.high_watermark == 2


def test_appended_skips_batches_without_an_epoch():
    state = follower(batches=(), log_end=0)
    state.appended([(-1, 0, 1), (3, 2, 2)], 0)
    assert entries(state) == [(3, 2)]
    assert state.log_end_offset == 3


@pytest.mark.parametrize("base_offset", [0, 2])
def test_appended_raises_on_a_batch_below_the_log_end(base_offset):
    # Kafka's UnifiedLog.append for a follower: UnexpectedAppendOffsetException below the next offset.
    state = follower()
    with pytest.raises(ValueError):
        state.appended([(5, base_offset, base_offset + 1)], 0)


def test_appended_raises_on_batches_overlapping_each_other():
    state = follower()
    with pytest.raises(ValueError):
        state.appended([(5, 3, 5), (5, 4, 6)], 0)


def test_appended_accepts_a_batch_past_the_log_end():
    # A compacted leader log's batches may leave gaps: the offsets are the leader's, kept as they are.
    state = follower()
    state.appended([(5, 4, 6)], 0)
    assert state.log_end_offset == 7
    assert entries(state) == [(0, 0), (2, 1), (4, 2), (5, 4)]
    assert state.position() == FetchPosition(7, 5, LEADER_EPOCH)


def test_appended_accepts_a_gap_between_batches():
    state = follower()
    state.appended([(5, 3, 4), (5, 6, 6), (6, 9, 10)], 8)
    assert state.log_end_offset == 11
    assert entries(state) == [(0, 0), (2, 1), (4, 2), (5, 3), (6, 9)]
    assert state.high_watermark == 8


# -- with a leader: truncation converges (AbstractFetcherThreadTest) -------------------------------


def kafka_leader(batches, log_end, hw) -> LeaderState:
    reg = PartitionRegistration((1, 2), (1, 2), 1, LEADER_EPOCH, 0)
    epochs = LeaderEpochCache.from_batches(batches)
    return LeaderState(1, reg, epochs, 0, log_end, hw, 0, 1, 30_000)


def sync(state: FollowerState, leader: LeaderState) -> list[int]:
    """Fetch until the leader answers with records; the offsets truncated to on the way."""
    cuts = []
    for _ in range(10):
        sent = state.start_fetch()
        verdict = leader.follower_fetch(2, 20, sent.current_leader_epoch, sent.fetch_offset, sent.last_fetched_epoch, 0)
        assert verdict.error is ErrorCode.none
        assert state.take(sent)
        if verdict.read:
            return cuts
        cut = state.truncation_offset(*verdict.diverging_epoch)
        state.truncated(cut)
        cuts.append(cut)
    raise AssertionError(f"no agreement after truncating to {cuts}")


def test_diverging_epochs_truncate_once_then_read():
    # AbstractFetcherThreadTest.testDivergingEpochs
    state = follower(batches=((0, 0), (2, 1), (4, 2)), log_end=3, hw=0)
    leader = kafka_leader([(0, 0), (2, 1), (5, 2)], log_end=3, hw=2)
    assert sync(state, leader) == [2]
    assert state.position() == FetchPosition(2, 2, LEADER_EPOCH)
    state.appended([(5, 2, 2)], leader.high_watermark)
    assert entries(state) == [(e.epoch, e.start_offset) for e in leader.epochs.entries]


def test_truncation_walks_back_through_unknown_epochs_until_the_logs_agree():
    # AbstractFetcherThreadTest.testTruncation: no epoch in common; every record goes.
    state = follower(batches=((0, 0), (2, 1), (4, 2)), log_end=3, hw=0)
    leader = kafka_leader([(1, 0), (3, 1), (5, 2)], log_end=3, hw=2)
    assert sync(state, leader) == [2, 1, 0]
    assert state.position() == FetchPosition(0, UNDEFINED_EPOCH, LEADER_EPOCH)
    state.appended([(1, 0, 0), (3, 1, 1), (5, 2, 2)], leader.high_watermark)
    assert entries(state) == [(e.epoch, e.start_offset) for e in leader.epochs.entries]
    assert (state.log_end_offset, state.high_watermark) == (3, 2)


def test_follower_ahead_within_the_leaders_epoch_truncates_to_the_leaders_end():
    state = follower(batches=((0, 0), (4, 2)), log_end=6, hw=2)
    leader = kafka_leader([(0, 0), (4, 2)], log_end=4, hw=2)  # led under 5 from 4
    assert sync(state, leader) == [4]
    assert state.position() == FetchPosition(4, 4, LEADER_EPOCH)
