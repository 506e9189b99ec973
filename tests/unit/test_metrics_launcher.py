"""The driver's side of metrics (issue 13): the dashboard option, the metrics endpoint's start,
and the controller's bounded gathering of actors' snapshots (fakes, no Ray)."""

from __future__ import annotations

import asyncio
import urllib.request
from types import SimpleNamespace

import pytest
import ray

from cluster import launcher
from cluster.calls.kinds import ActorKind
from cluster.config import Config
from cluster.metrics.gather import gather_snapshots


def test_dashboard_without_its_packages_is_one_line_naming_the_extra(monkeypatch):
    import ray._private.utils as ray_utils

    monkeypatch.setattr(ray_utils, "get_dashboard_dependency_error", lambda: ImportError("No module named 'aiohttp'", name="aiohttp"))
    monkeypatch.setattr(ray, "init", lambda **kwargs: pytest.fail("Ray must not start"))
    with pytest.raises(launcher.RayJoinError) as info:
        launcher.start_ray("ns", None, dashboard=True)
    message = str(info.value)
    assert "\n" not in message
    assert "raygroups[dashboard]" in message and "aiohttp" in message


def test_dashboard_starts_ray_with_its_dashboard_and_gives_its_url(monkeypatch):
    import ray._private.utils as ray_utils

    calls: list[dict] = []
    monkeypatch.setattr(ray_utils, "get_dashboard_dependency_error", lambda: None)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs) or SimpleNamespace(dashboard_url="127.0.0.1:8265"))
    assert launcher.start_ray("ns", None, dashboard=True) == "http://127.0.0.1:8265"
    assert calls[0]["include_dashboard"] is True
    calls.clear()
    assert launcher.start_ray("ns", None) is None
    assert calls[0]["include_dashboard"] is False


def test_no_metrics_endpoint_by_default_and_one_on_a_free_port_when_asked():
    controller = SimpleNamespace(metrics_blocking=lambda timeout: [])
    assert launcher.start_metrics(Config({}), controller, "127.0.0.1") is None
    endpoint = launcher.start_metrics(Config({"raygroups.metrics.port": 0}), controller, "127.0.0.1")
    try:
        with urllib.request.urlopen(endpoint.url, timeout=10) as answer:
            assert b"raygroups_scrape_actors_failed 0.0" in answer.read()
    finally:
        endpoint.stop()


def test_a_taken_metrics_port_is_a_one_line_error():
    controller = SimpleNamespace(metrics_blocking=lambda timeout: [])
    first = launcher.start_metrics(Config({"raygroups.metrics.port": 0}), controller, "127.0.0.1")
    try:
        with pytest.raises(launcher.RayJoinError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            launcher.start_metrics(Config({"raygroups.metrics.port": first.port}), controller, "127.0.0.1")
    finally:
        first.stop()


class _Pool:
    """Actors that answer, fail, or never answer."""

    async def metrics(self, handle: str, timeout: float) -> dict:
        if handle == "slow":
            return await asyncio.wait_for(asyncio.Event().wait(), timeout)
        if handle == "broken":
            raise RuntimeError("actor died")
        return {"counters": [("requests", {}, 1)], "histograms": [], "gauges": []}


def _entry(name: str, handle: str, alive: bool = True) -> SimpleNamespace:
    return SimpleNamespace(name=name, kind=ActorKind.GATEWAY, node_id="n", alive=alive, handle=handle)


def test_gathering_bounds_each_actor_reports_the_silent_and_skips_the_dead():
    entries = [_entry("gateway-0", "ok"), _entry("gateway-1", "slow"), _entry("gateway-2", "broken"),
               _entry("gateway-3", "gone", alive=False)]
    loop = asyncio.new_event_loop()
    try:
        started = loop.time()
        gathered = loop.run_until_complete(gather_snapshots(entries, _Pool(), 0.2, "n", [("offline_partitions", {}, 0.0)]))
        took = loop.time() - started
    finally:
        loop.close()
    assert took < 2
    by_name = {g["name"]: g for g in gathered}
    assert set(by_name) == {"controller", "gateway-0", "gateway-1", "gateway-2"}
    assert by_name["gateway-0"]["metrics"]["counters"] == [("requests", {}, 1)]
    assert "TimeoutError" in by_name["gateway-1"]["error"]
    assert "actor died" in by_name["gateway-2"]["error"]
    own = by_name["controller"]["metrics"]["gauges"]
    assert own[0] == ("offline_partitions", {}, 0.0)
    actors = {(g[1]["actor_kind"], g[1]["alive"]): g[2] for g in own if g[0] == "actors"}
    assert actors == {("gateway", "true"): 3, ("gateway", "false"): 1}
