"""`raygroups up` starts its own Ray unless told which cluster to join (issue 9)."""

from __future__ import annotations

import os

import ray

from cluster import launcher


def _captured_init(monkeypatch) -> list[dict]:
    calls: list[dict] = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    return calls


def test_without_an_address_an_embedded_ray_starts_rather_than_joining_a_leftover_one(monkeypatch):
    calls = _captured_init(monkeypatch)
    launcher.start_ray("ns", None)
    # ray.init() with no address joins whatever `ray start` last recorded on the machine.
    assert calls[0]["address"] == "local"
    assert calls[0]["namespace"] == "ns"


def test_with_an_address_ray_joins_that_cluster(monkeypatch):
    calls = _captured_init(monkeypatch)
    launcher.start_ray("ns", "10.0.0.5:6379")
    assert calls[0]["address"] == "10.0.0.5:6379"


def test_an_embedded_ray_returns_answers_up_to_a_share_fetch_inline_and_a_joined_one_keeps_its_config(monkeypatch):
    calls = _captured_init(monkeypatch)
    launcher.start_ray("ns", None)
    launcher.start_ray("ns", "10.0.0.5:6379")  # Ray refuses a _system_config when joining
    assert calls[0]["_system_config"]["max_direct_call_object_size"] >= 512 * 1024
    assert "_system_config" not in calls[1]


def test_the_operator_listeners_are_each_gateways_in_broker_order_and_none_when_unknown():
    from types import SimpleNamespace

    actors = [
        {"name": "gateway-10", "kind": "gateway", "operator_address": "127.0.0.1:4010"},
        {"name": "partition-leader-0", "kind": "partition-leader"},
        {"name": "gateway-2", "kind": "gateway", "operator_address": "127.0.0.1:4002"},
        {"name": "gateway-3", "kind": "gateway", "alive": False},  # dead: no listener
    ]
    controller = SimpleNamespace(actors_info_blocking=lambda timeout: actors)
    assert launcher.operator_addresses(controller) == ["127.0.0.1:4002", "127.0.0.1:4010"]

    def gone(timeout):
        raise TimeoutError("the controller did not answer")

    assert launcher.operator_addresses(SimpleNamespace(actors_info_blocking=gone)) == []


def test_an_embedded_ray_for_a_loopback_bind_runs_on_loopback_and_only_while_it_starts(monkeypatch):
    """Issue 21: Ray's servers listened on every interface while raygroups bound 127.0.0.1. Ray binds
    them to its node address when that is loopback, which on Linux it is only with Ray's
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (else it takes the routable address, even for
    _node_ip_address="127.0.0.1")."""
    import ray._private.ray_constants as ray_constants
    import ray._private.services as services

    seen: list[tuple] = []

    def init(**kwargs):
        seen.append((services.get_node_ip_address(), os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"),
                     kwargs.get("dashboard_host")))

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    routable = services.get_node_ip_address()
    for host in ("127.0.0.1", "localhost", "::1"):
        launcher.start_ray("ns", None, bind_host=host)
    assert seen == [("127.0.0.1", "0", "127.0.0.1")] * 3
    # Afterwards this process and the next Ray it starts are as before.
    assert ray_constants.ENABLE_RAY_CLUSTER and "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in os.environ
    seen.clear()
    launcher.start_ray("ns", None, bind_host="0.0.0.0")
    launcher.start_ray("ns", None)
    monkeypatch.setattr(launcher, "check_reachable", lambda address: None)
    launcher.start_ray("ns", "10.0.0.5:6379", bind_host="127.0.0.1")  # a cluster joined binds where it was started
    assert [s[:2] for s in seen] == [(routable, None)] * 3
