"""Every leadership change the controller makes is recorded with its cause, epoch and instants
(cluster/control/leadership_changes.py): the facts the experiments' checker judges a run by."""

from __future__ import annotations

from cluster.control.leadership_changes import Cause, LeadershipChange, LeadershipChanges
from cluster.metadata import CONSUMER_OFFSETS, TopicSpec
from tests.unit.controller import test_reconciler_nodes as nodes
from tests.unit.controller.test_reconciler import run, settle


def changes(controller, since: int = 0) -> list[dict]:
    return controller.leadership_changes(since)["changes"]


def test_startup_and_created_topics_are_recorded_with_their_epochs(tmp_path):
    async def test(controller, pool, clock):
        startup = changes(controller)
        assert {(c["topic"], c["partition"]) for c in startup} == set(controller._meta().leader_epochs)
        assert {c["cause"] for c in startup} == {"startup"}
        assert all(c["previous"] is None and c["released"] == c["began"] <= c["loaded"] for c in startup)
        mark = controller.leadership_changes(0)["next"]
        await controller.create_topics([TopicSpec("t", 2)])
        created = changes(controller, mark)
        assert [(c["topic"], c["partition"], c["cause"]) for c in created] == [("t", 0, "created"), ("t", 1, "created")]
        epochs = controller._meta().leader_epochs
        assert all(c["leader_epoch"] == epochs[("t", c["partition"])] and c["actor"] == controller.leaders[("t", c["partition"])]
                   for c in created)

    run(test, tmp_path)


def test_a_failover_names_the_dead_leader_and_it_released_when_the_change_began(tmp_path):
    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 2)])
        victim = controller.leaders[("t", 0)]
        led = {tp for tp, name in controller.leaders.items() if name == victim}
        epochs = dict(controller._meta().leader_epochs)
        mark = controller.leadership_changes(0)["next"]
        pool.kill(pool.by_name(victim))
        await settle(controller)
        failover = [c for c in changes(controller, mark) if c["cause"] == "failover"]
        assert {(c["topic"], c["partition"]) for c in failover} == led
        # Its replacement then takes its share back at once (issue 21): a balance move, not a failover.
        taken_back = [c for c in changes(controller, mark) if c["cause"] != "failover"]
        assert taken_back and {c["cause"] for c in taken_back} == {"balance"}
        assert all(controller.actors[c["actor"]].kind is controller.actors[victim].kind and c["actor"] != victim
                   for c in taken_back)
        for c in failover:
            tp = (c["topic"], c["partition"])
            assert c["cause"] == "failover" and c["previous"] == victim and c["actor"] == controller.leaders[tp]
            assert c["leader_epoch"] == epochs[tp] + 1
            # The dead leader served nothing asked after the controller began to move its partitions.
            assert c["released"] == c["began"] <= c["loaded"]

    run(test, tmp_path)


def test_an_operator_move_releases_when_the_old_leader_has_unloaded(tmp_path):
    async def test(controller, pool, clock):
        tp = (CONSUMER_OFFSETS, 1)
        old = controller.leaders[tp]
        target = "group-coordinator-0" if old != "group-coordinator-0" else "group-coordinator-1"
        mark = controller.leadership_changes(0)["next"]
        epoch = await controller.move(*tp, target)
        [change] = changes(controller, mark)
        assert change["cause"] == "operator-move" and change["previous"] == old and change["actor"] == target
        assert change["leader_epoch"] == epoch
        assert change["began"] <= change["released"] <= change["loaded"]
        assert tp not in pool.by_name(old).loaded  # unloaded before `released`

    run(test, tmp_path)


def test_a_failed_load_is_recorded_without_a_load_time(tmp_path):
    async def test(controller, pool, clock):
        pool.failing_loads[("full", 0)] = 1
        mark = controller.leadership_changes(0)["next"]
        await controller.create_topics([TopicSpec("full", 1)])
        [change] = changes(controller, mark)
        assert change["loaded"] is None

    run(test, tmp_path)


def test_partitions_left_without_an_actor_of_their_kind_are_recorded_unavailable(tmp_path):
    async def test(controller, pool, clock):
        mark = controller.leadership_changes(0)["next"]
        pool.kill(pool.by_name("share-coordinator-0"))
        await settle(controller)
        gone = changes(controller, mark)
        assert len(gone) == 2 and {c["cause"] for c in gone} == {"unavailable"}
        assert all(c["actor"] is None and c["previous"] == "share-coordinator-0" for c in gone)

    run(test, tmp_path, **{"raygroups.actor.replace": False})


def test_a_node_that_leaves_is_a_node_loss_and_a_join_is_balanced(tmp_path):
    async def test(controller, pool, clock):
        await controller.create_topics([TopicSpec("t", 12)])
        await settle(controller)
        on_c = {tp for tp, n in controller.leaders.items() if controller.actors[n].node_id == "c"}
        mark = controller.leadership_changes(0)["next"]
        pool.alive_nodes.remove("c")
        clock.now += 5
        await nodes.until_balanced(controller, clock)
        lost = [c for c in changes(controller, mark) if c["cause"] == "node-loss"]
        assert {(c["topic"], c["partition"]) for c in lost} == on_c
        # Its actors may answer until the partitions are loaded elsewhere.
        assert all(c["released"] == c["loaded"] for c in lost)
        mark = controller.leadership_changes(0)["next"]
        pool.alive_nodes.append("d")
        clock.now += 5
        await nodes.until_balanced(controller, clock)
        assert {c["cause"] for c in changes(controller, mark)} == {"balance"}

    nodes.run(test, tmp_path, ["a", "b", "c"])


def test_readers_page_through_the_changes_and_see_what_the_capacity_dropped():
    log = LeadershipChanges(capacity=3)
    for i in range(5):
        log.record(LeadershipChange("t", i, 1, "a", None, Cause.STARTUP, 1.0, 1.0, 2.0))
    page = log.since(0)
    assert page["next"] == 5 and page["dropped"] == 2
    assert [c["partition"] for c in page["changes"]] == [2, 3, 4]
    assert log.since(4)["changes"][0]["partition"] == 4 and log.since(4)["dropped"] == 0
    assert log.since(5)["changes"] == []
    assert LeadershipChanges().incarnation != log.incarnation
