"""`raygroups up` starts its own Ray unless told which cluster to join (issue 9)."""

from __future__ import annotations

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
