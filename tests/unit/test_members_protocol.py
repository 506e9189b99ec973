"""The light load client's pieces that need no cluster: assignors and the consumer protocol."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loadtest.members.assignors import range_assign, round_robin_assign
from loadtest.members.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def test_range_gives_the_first_members_the_extra_partitions_per_topic():
    subs = {"c": ["t"], "a": ["t", "u"], "b": ["t"]}
    assert range_assign(subs, {"t": 7, "u": 2}) == {
        "a": {"t": [0, 1, 2], "u": [0, 1]},
        "b": {"t": [3, 4]},
        "c": {"t": [5, 6]},
    }


def test_round_robin_deals_partitions_across_topics_skipping_non_subscribers():
    subs = {"a": ["t", "u"], "b": ["t"]}
    assert round_robin_assign(subs, {"t": 3, "u": 2}) == {"a": {"t": [0, 2], "u": [0, 1]}, "b": {"t": [1]}}


@given(
    members=st.integers(1, 12),
    partitions=st.integers(0, 40),
    assignor=st.sampled_from([range_assign, round_robin_assign]),
)
def test_every_partition_is_assigned_exactly_once_and_balanced(members, partitions, assignor):
    subs = {f"m{i:02d}": ["t"] for i in range(members)}
    plan = assignor(subs, {"t": partitions})
    owned = [p for a in plan.values() for p in a.get("t", [])]
    assert sorted(owned) == list(range(partitions))
    counts = [len(a.get("t", [])) for a in plan.values()]
    assert max(counts) - min(counts) <= 1


def test_consumer_protocol_round_trips():
    assert decode_subscription(encode_subscription(["a", "b"])) == (["a", "b"], {})
    assert decode_assignment(encode_assignment({"t": [1, 2], "a": [0]})) == {"a": [0], "t": [1, 2]}
    assert decode_assignment(b"") == {}
