"""Share sessions on a gateway: epochs, limits, forgetting, closing (Kafka's ShareSessionCache)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from cluster.gateway.handlers.share_fetch import invalid_acknowledgements
from cluster.gateway.share_sessions import SessionError, ShareSessionCache, next_epoch
from sharestate.partition import AcknowledgementBatch

T = uuid.uuid4()


def error_of(call) -> ErrorCode:
    with pytest.raises(SessionError) as info:
        call()
    return info.value.error_code


def test_epochs_open_advance_and_close():
    cache = ShareSessionCache(10)
    session, final = cache.fetch("g", "m", 0, connection_id=1, added=[(T, 0), (T, 1)])
    assert session.epoch == 1 and not final and list(session.partitions) == [(T, 0), (T, 1)]
    assert error_of(lambda: cache.fetch("g", "m", 5, 1)) == ErrorCode.invalid_share_session_epoch
    session, _ = cache.fetch("g", "m", 1, 1, added=[(T, 2)], forgotten=[(T, 0)])
    assert session.epoch == 2 and list(session.partitions) == [(T, 1), (T, 2)]
    assert cache.acknowledge("g", "m", 2).epoch == 3  # ShareAcknowledge advances the same epoch
    closed, final = cache.fetch("g", "m", -1, 1, added=[(T, 9)])
    assert final and closed is session and len(cache) == 0
    assert error_of(lambda: cache.fetch("g", "m", 3, 1)) == ErrorCode.share_session_not_found


def test_opening_rules():
    cache = ShareSessionCache(1)
    assert error_of(lambda: cache.fetch("g", "m", 0, 1, acknowledging=True)) == ErrorCode.invalid_request
    first, _ = cache.fetch("g", "m", 0, 1)
    again, _ = cache.fetch("g", "m", 0, 1)  # epoch 0 again replaces the member's session
    assert again is not first and len(cache) == 1
    assert error_of(lambda: cache.fetch("g", "other", 0, 2)) == ErrorCode.share_session_limit_reached
    assert error_of(lambda: cache.acknowledge("g", "m", 0)) == ErrorCode.invalid_share_session_epoch


def test_a_closed_connection_ends_its_sessions_only():
    cache = ShareSessionCache(10)
    cache.fetch("g", "a", 0, connection_id=1)
    cache.fetch("g", "b", 0, connection_id=2)
    assert [s.member_id for s in cache.disconnected(1)] == ["a"]
    assert list(cache.sessions) == [("g", "b")]


def test_a_session_belongs_to_the_connection_that_created_it():
    # Kafka's ShareSession.connectionId is the creating connection's; later requests of the
    # session on other connections are served but do not move it (ShareSessionCache.maybeCreateSession).
    cache = ShareSessionCache(10)
    session, _ = cache.fetch("g", "m", 0, connection_id=1)
    cache.fetch("g", "m", 1, connection_id=2)
    assert cache.disconnected(2) == [] and cache.holds(session)
    assert cache.disconnected(1) == [session] and not cache.holds(session)


def test_a_reconnect_race_does_not_end_the_new_session():
    # The member reconnects on B and opens epoch 0 while A's close is still to come; a request
    # of the new session that was under way on A is served there. A's close then ends nothing:
    # the session it created was replaced (Kafka marks its entry stale, KAFKA-19950); B's close
    # ends the session B created.
    cache = ShareSessionCache(10)
    old, _ = cache.fetch("g", "m", 0, connection_id=1, added=[(T, 0)])
    new, _ = cache.fetch("g", "m", 0, connection_id=2, added=[(T, 0)])
    assert new.epoch == 1 and not cache.holds(old)
    cache.fetch("g", "m", 1, connection_id=1)
    assert cache.disconnected(1) == [] and cache.holds(new)
    assert cache.disconnected(2) == [new] and len(cache) == 0


def test_next_epoch_wraps_to_one():
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_rotation_moves_the_first_partition_each_request():
    cache = ShareSessionCache(10)
    session, _ = cache.fetch("g", "m", 0, 1, added=[(T, 0), (T, 1), (T, 2)])
    assert [p for _, p in session.rotated()] == [0, 1, 2]
    cache.fetch("g", "m", 1, 1)
    assert [p for _, p in session.rotated()] == [1, 2, 0]


@pytest.mark.parametrize(
    "batches, ok",
    [
        ([(0, 4, (1,))], True),
        ([(0, 2, (1, 2, 3)), (3, 3, (0,))], True),
        ([(5, 4, (1,))], False),  # ends before it starts
        ([(0, 4, (1,)), (3, 6, (1,))], False),  # overlapping
        ([(5, 6, (1,)), (0, 1, (1,))], False),  # out of order
        ([(0, 4, ())], False),  # no types
        ([(0, 4, (1, 2))], False),  # neither one nor one per offset
        ([(0, 0, (4,))], False),  # RENEW needs ShareFetch v2
    ],
)
def test_malformed_acknowledgements(batches, ok):
    problem = invalid_acknowledgements(tuple(AcknowledgementBatch(*b) for b in batches))
    assert (problem is None) == ok


def test_a_session_out_of_the_cache_is_marked_closed_whichever_way_it_left():
    cache = ShareSessionCache(10)
    first, _ = cache.fetch("g", "m", 0, 1)
    replacing, _ = cache.fetch("g", "m", 0, 1)
    assert not cache.holds(first) and cache.holds(replacing)
    final, _ = cache.fetch("g", "m", -1, 1)
    assert final is replacing and not cache.holds(final)
    acked, _ = cache.fetch("g", "a", 0, 1)
    assert not cache.holds(cache.acknowledge("g", "a", -1)) and not cache.holds(acked)
    gone, _ = cache.fetch("g", "b", 0, 2)
    cache.disconnected(2)
    assert not cache.holds(gone)


def test_a_partition_listed_and_forgotten_in_one_request_leaves_the_session():
    """Kafka's ShareSession.update adds the request's partitions, then removes the forgotten ones:
    a member that acknowledges records of a partition it now fetches elsewhere (its leader moved)
    lists it with the acknowledgements and forgets it, and nothing more is acquired for it here."""
    cache = ShareSessionCache(10)
    cache.fetch("g", "m", 0, connection_id=1, added=[(T, 0), (T, 1)])
    session, _ = cache.fetch("g", "m", 1, 1, added=[(T, 0)], forgotten=[(T, 0)], acknowledging=True)
    assert list(session.partitions) == [(T, 1)]
