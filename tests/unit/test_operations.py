"""The operation enums (cluster/calls/operations.py) agree with what they name: each coordinator
operation runs its shard's function on the request type that function takes, each endpoint is a
method of the actor class of its kind, and every member crosses a pickle as itself."""

from __future__ import annotations

import inspect
import pickle
import typing

import pytest

from coordinator.shard import GroupCoordinatorShard
from sharestate.coordinator_shard import ShareCoordinatorShard

from cluster.actors.gateway import GatewayActor
from cluster.actors.group_coordinator import GroupCoordinatorActor
from cluster.actors.partition_leader import PartitionLeaderActor
from cluster.actors.share_coordinator import ShareCoordinatorActor
from cluster.calls import ActorKind, CoordinatorItem, CoordinatorOp, Endpoint, ShareStateOp

SHARDS = {CoordinatorOp: GroupCoordinatorShard, ShareStateOp: ShareCoordinatorShard}
ACTORS = {
    ActorKind.GROUP_COORDINATOR: GroupCoordinatorActor,
    ActorKind.SHARE_COORDINATOR: ShareCoordinatorActor,
    ActorKind.PARTITION_LEADER: PartitionLeaderActor,
    ActorKind.GATEWAY: GatewayActor,
}
OPS = [*CoordinatorOp, *ShareStateOp]


@pytest.mark.parametrize("op", OPS, ids=lambda op: f"{type(op).__name__}.{op.name}")
def test_an_operation_runs_a_function_of_its_shard_on_the_request_type_that_function_takes(op):
    shard = SHARDS[type(op)]
    name = op.run.__name__
    assert getattr(shard, name, None) is op.run, f"{op} runs {op.run.__qualname__}, not a method of {shard.__name__}"
    params = list(inspect.signature(op.run).parameters)
    assert params[0] == "self" and params[-1] == "token", f"{name} is not (self, request, token): {params}"
    hints = typing.get_type_hints(op.run)
    assert hints[params[1]] == op.request_type, f"{op} says {op.request_type}, {name} takes {hints[params[1]]}"


def test_only_join_and_sync_park_and_only_the_share_heartbeat_initializes_share_state():
    assert [op for op in CoordinatorOp if op.parks] == [CoordinatorOp.JOIN, CoordinatorOp.SYNC]
    assert [op for op in CoordinatorOp if op.initializes_share_state] == [CoordinatorOp.SHARE_HEARTBEAT]
    assert [op for op in CoordinatorOp if op.deletes_share_state] == [CoordinatorOp.DELETE]
    assert [op for op in CoordinatorOp if op.commits] == [CoordinatorOp.COMMIT]


@pytest.mark.parametrize("endpoint", list(Endpoint), ids=lambda e: e.name)
def test_an_endpoint_is_a_method_of_the_actor_class_of_its_kind(endpoint):
    actor_class = ACTORS[endpoint.kind].__ray_actor_class__
    assert callable(getattr(actor_class, endpoint.method, None)), f"{actor_class.__name__} has no {endpoint.method}"


@pytest.mark.parametrize("member", [*OPS, *Endpoint], ids=lambda m: f"{type(m).__name__}.{m.name}")
def test_a_member_crosses_a_pickle_as_itself_by_name(member):
    data = pickle.dumps(member, protocol=pickle.HIGHEST_PROTOCOL)
    assert pickle.loads(data) is member
    assert member.name.encode() in data  # a global reference, not the value (which holds functions)


def test_an_item_crosses_a_pickle_as_a_tuple_of_its_fields():
    item = CoordinatorItem(CoordinatorOp.HEARTBEAT, 7, 3, None)
    assert item.__reduce__() == (CoordinatorItem, (CoordinatorOp.HEARTBEAT, 7, 3, None))
    assert pickle.loads(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)) == item
