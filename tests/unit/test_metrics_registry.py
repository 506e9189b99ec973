"""The per-process registry and the rebalance watch (issue 13): plain numbers, no Ray."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

from cluster.metrics.rebalances import RebalanceWatch
from cluster.metrics.registry import Registry


def test_counters_add_per_name_and_labels():
    r = Registry()
    r.inc("requests", (("api", "Produce"),))
    r.inc("requests", (("api", "Produce"),), 2)
    r.inc("requests", (("api", "Fetch"),))
    r.inc("failovers")
    counters = {(name, tuple(sorted(labels.items()))): v for name, labels, v in r.snapshot()["counters"]}
    assert counters == {
        ("requests", (("api", "Produce"),)): 3,
        ("requests", (("api", "Fetch"),)): 1,
        ("failovers", ()): 1,
    }


def test_histogram_counts_each_value_in_the_first_bucket_that_holds_it():
    r = Registry()
    for value in (0.5, 1, 1.5, 7, 100_000):
        r.observe("request_latency_ms", value, bounds=(1, 5, 10))
    [(name, labels, bounds, counts, total, count)] = r.snapshot()["histograms"]
    assert (name, labels, bounds) == ("request_latency_ms", {}, [1, 5, 10])
    # <=1: 0.5 and 1; <=5: 1.5; <=10: 7; above: 100000 (Prometheus' le is inclusive).
    assert counts == [2, 1, 1, 1]
    assert (total, count) == (100_010.0, 5)


def test_a_snapshot_is_plain_data_a_copy_and_carries_the_gauges_given():
    r = Registry()
    r.inc("share_fetches")
    r.observe("partition_load_time_ms", 3)
    snapshot = r.snapshot([("connections", {}, 2.0)])
    r.inc("share_fetches")
    r.observe("partition_load_time_ms", 3)
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot
    assert snapshot["counters"] == [("share_fetches", {}, 1)]
    assert snapshot["histograms"][0][5] == 1
    assert snapshot["gauges"] == [("connections", {}, 2.0)]


def _classic(generation: int, state: str) -> SimpleNamespace:
    return SimpleNamespace(group_type="classic", generation_id=generation, state=SimpleNamespace(value=state))


def _rebalances(r: Registry) -> dict[str, float]:
    return {labels["protocol"]: v for name, labels, v in r.snapshot()["counters"] if name == "group_rebalances"}


def test_a_new_classic_group_counts_its_first_rebalance_with_its_duration():
    now = [100.0]
    r = Registry()
    watch = RebalanceWatch(r, clock=lambda: now[0])
    watch.before_join("g", None)
    now[0] = 100.25
    watch.observe("g", _classic(1, "CompletingRebalance"))
    watch.observe("g", _classic(1, "Stable"))  # the other members' answers: the same rebalance
    assert _rebalances(r) == {"classic": 1}
    [(_, _, _bounds, _counts, total, count)] = r.snapshot()["histograms"]
    assert count == 1 and abs(total - 250) < 1e-6


def test_a_rebalance_of_a_known_group_runs_from_preparing_to_its_new_generation():
    now = [0.0]
    r = Registry()
    watch = RebalanceWatch(r, clock=lambda: now[0])
    watch.observe("g", _classic(4, "Stable"))  # first seen after a load: nothing counted
    assert _rebalances(r) == {}
    now[0] = 1.0
    watch.observe("g", _classic(4, "PreparingRebalance"))
    now[0] = 3.0
    watch.observe("g", _classic(4, "PreparingRebalance"))
    now[0] = 4.0
    watch.observe("g", _classic(5, "CompletingRebalance"))
    assert _rebalances(r) == {"classic": 1}
    assert r.snapshot()["histograms"][0][4] == 3000.0


def test_share_groups_count_group_epoch_bumps_and_a_deleted_group_starts_afresh():
    r = Registry()
    watch = RebalanceWatch(r)
    share = lambda epoch: SimpleNamespace(group_type="share", group_epoch=epoch, state=SimpleNamespace(value="Stable"))  # noqa: E731
    watch.observe("s", share(1))
    watch.observe("s", share(3))
    watch.observe("s", None)
    watch.observe("s", share(7))
    assert _rebalances(r) == {"share": 2}


def test_a_new_group_s_member_id_required_answer_from_an_empty_group_does_not_end_its_first_rebalance():
    now = [0.0]
    r = Registry()
    watch = RebalanceWatch(r, clock=lambda: now[0])
    watch.before_join("g", None)
    watch.observe("g", _classic(0, "Empty"))  # JoinGroup answered MEMBER_ID_REQUIRED
    watch.before_join("g", _classic(0, "Empty"))
    watch.observe("g", _classic(0, "PreparingRebalance"))
    now[0] = 0.5
    watch.observe("g", _classic(1, "CompletingRebalance"))
    assert _rebalances(r) == {"classic": 1}
    assert r.snapshot()["histograms"][0][4] == 500.0


def test_a_rebalance_every_member_left_is_not_timed_into_the_next_one():
    now = [0.0]
    r = Registry()
    watch = RebalanceWatch(r, clock=lambda: now[0])
    watch.observe("g", _classic(3, "Stable"))
    watch.observe("g", _classic(3, "PreparingRebalance"))
    watch.observe("g", _classic(3, "Empty"))
    now[0] = 100.0
    watch.observe("g", _classic(3, "PreparingRebalance"))
    now[0] = 101.0
    watch.observe("g", _classic(4, "CompletingRebalance"))
    assert r.snapshot()["histograms"][0][4] == 1000.0
