"""The assignors by name (`group.consumer.assignors`): `uniform` picks the homogeneous or the
heterogeneous builder by the group's subscriptions, as Kafka's UniformAssignor does."""

from __future__ import annotations

import uuid

import pytest

from coordinator.consumer import assignors
from coordinator.consumer.assignment_spec import GroupSpec, MemberSpec, Topics

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = Topics({T1: 3, T2: 2})


def test_uniform_uses_the_homogeneous_builder_when_every_member_subscribes_alike(monkeypatch):
    calls = []
    monkeypatch.setattr(assignors, "assign_homogeneous", lambda spec, topics: calls.append("homogeneous") or {})
    monkeypatch.setattr(assignors, "assign_heterogeneous", lambda spec, topics: calls.append("heterogeneous") or {})
    both = frozenset({T1, T2})
    assignors.assign_uniform(GroupSpec({"a": MemberSpec(both), "b": MemberSpec(both)}), TOPICS)
    assignors.assign_uniform(GroupSpec({"a": MemberSpec(both), "b": MemberSpec(frozenset({T1}))}), TOPICS)
    assert calls == ["homogeneous", "heterogeneous"]


def test_uniform_over_no_members_assigns_nothing():
    assert assignors.assign_uniform(GroupSpec({}), TOPICS) == {}


def test_every_partition_once_through_either_name():
    spec = GroupSpec({"a": MemberSpec(frozenset({T1, T2})), "b": MemberSpec(frozenset({T1}))})
    for name in assignors.DEFAULT_ASSIGNORS:
        result = assignors.assignor(name)(spec, TOPICS)
        owned = sorted((t.int, p) for parts in result.values() for t, ps in parts.items() for p in ps)
        assert owned == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1)], name
        assert T2 not in result["b"], name


def test_an_unknown_name_says_which_are_known():
    with pytest.raises(KeyError, match="known: uniform, range"):
        assignors.assignor("cooperative-sticky")
