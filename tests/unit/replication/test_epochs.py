"""LeaderEpochCache against Kafka's LeaderEpochFileCache (and LeaderEpochFileCacheTest)."""

from __future__ import annotations

import pytest

from cluster.replication.epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochEntry, LeaderEpochCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    """A cache built by assigning each (epoch, start offset) in turn."""
    c = LeaderEpochCache()
    for epoch, start in pairs:
        c.assign(epoch, start)
    return c


def entries(c: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in c.entries]


# -- assign ---------------------------------------------------------------------------------------


def test_empty_cache_has_undefined_latest_epoch():
    assert LeaderEpochCache().latest_epoch == UNDEFINED_EPOCH
    assert entries(LeaderEpochCache()) == []


def test_assign_records_the_epoch_and_its_start():
    c = LeaderEpochCache()
    assert c.assign(2, 10) is True
    assert entries(c) == [(2, 10)]
    assert c.latest_epoch == 2


def test_assign_latest_epoch_at_a_later_offset_changes_nothing():
    c = cache((2, 6))
    assert c.assign(2, 7) is False
    assert entries(c) == [(2, 6)]


def test_assign_latest_epoch_at_an_earlier_offset_moves_its_start():
    c = cache((2, 10))
    assert c.assign(2, 9) is True
    assert entries(c) == [(2, 9)]


def test_assign_matching_epoch_at_earlier_offset_drops_entries_starting_after_it():
    c = cache((5, 11), (6, 12), (7, 13))
    c.assign(7, 12)
    assert entries(c) == [(5, 11), (7, 12)]
    assert c.end_offset_for(5, 0) == (5, 12)
    assert c.end_offset_for(6, 0) == (5, 12)


def test_assign_newer_epoch_at_same_offset_replaces_the_older_one():
    c = cache((2, 9))
    c.assign(3, 9)
    assert entries(c) == [(3, 9)]


def test_assign_newer_epoch_at_earlier_offset_removes_the_conflicting_entry():
    c = cache((2, 6))
    c.assign(3, 5)
    assert entries(c) == [(3, 5)]


def test_assign_older_epoch_removes_every_entry_at_or_above_it():
    c = cache((1, 5), (2, 6))
    c.assign(1, 7)
    assert entries(c) == [(1, 7)]
    assert c.latest_epoch == 1
    assert c.end_offset_for(1, 8) == (1, 8)
    assert c.end_offset_for(2, 8) == UNDEFINED


def test_assign_keeps_non_conflicting_entries():
    c = cache((0, 0), (1, 3))
    c.assign(2, 6)
    assert entries(c) == [(0, 0), (1, 3), (2, 6)]


@pytest.mark.parametrize("epoch, start", [(-1, 0), (0, -1), (-1, -1)])
def test_assign_rejects_negative_epoch_or_offset(epoch, start):
    with pytest.raises(ValueError):
        LeaderEpochCache().assign(epoch, start)


def test_successive_leaders_at_the_same_offset_keep_only_the_newest():
    c = cache((0, 0), (1, 0))
    assert entries(c) == [(1, 0)]
    assert c.end_offset_for(1, 0) == (1, 0)
    assert c.end_offset_for(0, 0) == (0, 0)


def test_constructor_assigns_entries_in_order():
    c = LeaderEpochCache([EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(1, 7)])
    assert entries(c) == [(0, 0), (1, 7)]


# -- end_offset_for ------------------------------------------------------------------------------


def test_end_offset_for_undefined_epoch_is_undefined():
    c = cache((2, 11), (3, 12))
    assert c.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_end_offset_for_on_empty_cache_is_undefined():
    assert LeaderEpochCache().end_offset_for(7, 0) == UNDEFINED
    assert LeaderEpochCache().end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_end_offset_for_latest_epoch_is_the_log_end():
    c = cache((2, 6))
    assert c.end_offset_for(2, 11) == (2, 11)


def test_end_offset_for_an_older_epoch_is_the_next_epochs_start():
    c = cache((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert c.end_offset_for(2, 17) == (2, 15)


def test_end_offset_for_an_unknown_epoch_between_known_ones_is_the_floor_epoch():
    c = cache((0, 10), (2, 13), (4, 17))
    assert c.end_offset_for(1, 0) == (0, 13)
    assert c.end_offset_for(2, 0) == (2, 17)
    assert c.end_offset_for(3, 0) == (2, 17)


def test_end_offset_for_epoch_below_all_known_is_itself_and_the_first_start():
    c = cache((5, 11), (6, 12), (7, 13))
    assert c.end_offset_for(4, 0) == (4, 11)


def test_end_offset_for_epoch_above_all_known_is_undefined():
    c = cache((2, 100))
    assert c.end_offset_for(3, 100) == UNDEFINED


def test_end_offset_for_tracks_epochs_as_a_follower_appends():
    c = cache((0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6), (2, 7), (2, 8))
    assert entries(c) == [(0, 0), (1, 3), (2, 6)]
    assert c.end_offset_for(2, 9) == (2, 9)
    assert c.end_offset_for(0, 9) == (0, 3)
    assert c.end_offset_for(1, 9) == (1, 6)


# -- truncate_from_end ---------------------------------------------------------------------------


def three_epochs() -> LeaderEpochCache:
    return cache((2, 6), (3, 8), (4, 11))


def test_truncate_from_end_on_an_epoch_boundary_drops_that_epoch():
    c = three_epochs()
    c.truncate_from_end(8)
    assert entries(c) == [(2, 6)]


def test_truncate_from_end_inside_an_epoch_keeps_that_epoch():
    c = three_epochs()
    c.truncate_from_end(9)
    assert entries(c) == [(2, 6), (3, 8)]
    assert c.latest_epoch == 3


def test_truncate_from_end_past_the_last_start_keeps_everything():
    c = three_epochs()
    c.truncate_from_end(12)
    assert entries(c) == [(2, 6), (3, 8), (4, 11)]


def test_truncate_from_end_to_zero_clears_the_cache():
    c = three_epochs()
    c.truncate_from_end(0)
    assert entries(c) == []
    assert c.latest_epoch == UNDEFINED_EPOCH


def test_truncate_from_end_on_empty_cache_is_harmless():
    c = LeaderEpochCache()
    c.truncate_from_end(7)
    assert entries(c) == []


@pytest.mark.parametrize("end_offset", [UNDEFINED_OFFSET, -5])
def test_truncate_from_end_with_a_negative_offset_keeps_everything(end_offset):
    # LeaderEpochFileCacheTest.shouldNotResetEpochHistoryTailIfUndefinedPassed: Kafka's
    # truncateFromEnd does nothing unless endOffset >= 0 (without the guard every entry would go).
    c = three_epochs()
    c.truncate_from_end(end_offset)
    assert entries(c) == [(2, 6), (3, 8), (4, 11)]
    assert c.latest_epoch == 4


def test_truncate_from_end_with_a_negative_offset_keeps_an_entry_at_zero():
    c = cache((0, 0), (1, 4))
    c.truncate_from_end(UNDEFINED_OFFSET)
    assert entries(c) == [(0, 0), (1, 4)]


# -- truncate_from_start -------------------------------------------------------------------------


def test_truncate_from_start_on_an_epoch_boundary_drops_the_earlier_epochs():
    c = three_epochs()
    c.truncate_from_start(8)
    assert entries(c) == [(3, 8), (4, 11)]


def test_truncate_from_start_inside_an_epoch_moves_its_start():
    c = three_epochs()
    c.truncate_from_start(9)
    assert entries(c) == [(3, 9), (4, 11)]


def test_truncate_from_start_inside_the_first_epoch_moves_only_its_start():
    c = cache((0, 0), (1, 7), (2, 10))
    c.truncate_from_start(5)
    assert entries(c) == [(0, 5), (1, 7), (2, 10)]


def test_truncate_from_start_before_the_first_epoch_keeps_everything():
    c = three_epochs()
    c.truncate_from_start(1)
    assert entries(c) == [(2, 6), (3, 8), (4, 11)]


def test_truncate_from_start_at_the_first_start_keeps_everything():
    c = three_epochs()
    c.truncate_from_start(6)
    assert entries(c) == [(2, 6), (3, 8), (4, 11)]


def test_truncate_from_start_at_the_latest_start_keeps_only_the_latest():
    c = three_epochs()
    c.truncate_from_start(11)
    assert entries(c) == [(4, 11)]


def test_truncate_from_start_past_the_latest_start_moves_the_latest():
    c = three_epochs()
    c.truncate_from_start(15)
    assert entries(c) == [(4, 15)]


def test_truncate_from_start_with_undefined_offset_keeps_everything():
    c = three_epochs()
    c.truncate_from_start(UNDEFINED_OFFSET)
    assert entries(c) == [(2, 6), (3, 8), (4, 11)]


def test_truncate_from_start_on_empty_cache_is_harmless():
    c = LeaderEpochCache()
    c.truncate_from_start(7)
    assert entries(c) == []


def test_truncate_from_both_ends():
    c = three_epochs()
    c.truncate_from_end(11)
    c.truncate_from_start(8)
    assert entries(c) == [(3, 8)]


def test_end_offset_for_after_truncate_from_start_answers_below_first_epoch():
    c = three_epochs()
    c.truncate_from_start(9)
    assert c.end_offset_for(2, 12) == (2, 9)


# -- from_batches --------------------------------------------------------------------------------


def test_from_batches_keeps_the_first_offset_of_each_epoch():
    c = LeaderEpochCache.from_batches([(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (2, 6)])
    assert entries(c) == [(0, 0), (1, 3), (2, 6)]


def test_from_batches_skips_batches_without_an_epoch():
    c = LeaderEpochCache.from_batches([(-1, 0), (-1, 2), (3, 5), (3, 7)])
    assert entries(c) == [(3, 5)]


def test_from_batches_of_an_empty_log_is_empty():
    assert entries(LeaderEpochCache.from_batches([])) == []
