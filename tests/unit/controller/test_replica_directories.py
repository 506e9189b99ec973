"""Which replica each node's storage is (issue 25): actors that keep logs report their node's data
directory id at start; the controller's metadata gives each directory a replica id once, durably,
and never gives that id to another directory."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from cluster.calls.kinds import ActorKind, kind_for_topic
from cluster.replication.registration import AlterPartition
from cluster.config import Config
from cluster.control.controller import Controller
from cluster.metadata import CONSUMER_OFFSETS, SHARE_GROUP_STATE, TopicSpec
from kio.schema.errors import ErrorCode
from tests.unit.controller.fake_pool import FakeActor, FakeClock
from tests.unit.controller.test_reconciler import SMALL, settle
from tests.unit.controller.test_reconciler_nodes import NodePool


class StoragePool(NodePool):
    """Every node has a data directory of its own; actors but gateways report it."""

    def __init__(self, nodes: list[str], directories: dict[str, uuid.UUID]) -> None:
        super().__init__(nodes)
        self.directories = directories

    def spawn(self, kind: ActorKind, name: str) -> FakeActor:
        actor = super().spawn(kind, name)
        actor.directory = self.directories.get(actor.node_id)
        return actor

    def own_node(self) -> str:
        return "a"  # the controller's

    def spawn_on(self, kind: ActorKind, name: str, node_id: str) -> FakeActor:
        actor = super().spawn_on(kind, name, node_id)
        actor.directory = self.directories.get(node_id)
        return actor


# The tests of user topics keep the internal ones in one copy (their adoption into replication
# has tests of its own below), so that what they count and move is only what they made.
ONE_COPY_INTERNAL = {"offsets.topic.replication.factor": 1, "share.coordinator.state.topic.replication.factor": 1}


def run(test, data_dir: Path, pool: StoragePool, clock: Any = time.monotonic, **settings) -> None:
    """Start a controller over `pool` (and `clock`, where the test moves time), run `test(controller)`."""
    async def main() -> None:
        config = Config({**SMALL, **ONE_COPY_INTERNAL, **settings})
        controller = Controller(config, data_dir, "127.0.0.1", 0, "test", pool=pool, clock=clock)
        await controller.start()
        try:
            await test(controller)
        finally:
            await controller.shutdown()
            controller.executor.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def replica_of(controller) -> dict[str, set[int]]:
    """The replica ids each node's live actors were given, gateways left out."""
    out: dict[str, set[int]] = {}
    for e in controller.actors.values():
        if e.alive and e.kind is not ActorKind.GATEWAY:
            out.setdefault(e.node_id, set()).add(e.replica_id)
    return out


def test_each_node_is_one_replica_and_keeps_it_across_a_controller_restart(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}
    seen: dict[str, set[int]] = {}

    async def first(controller):
        await settle(controller)
        seen.update(replica_of(controller))
        assert all(len(ids) == 1 for ids in seen.values())  # one replica a node
        assert sorted(min(ids) for ids in seen.values()) == [0, 1, 2]
        status = controller.status()["replicas"]
        assert [(r["replica_id"], r["nodes"]) for r in status] == sorted(
            (min(ids), [node]) for node, ids in seen.items())
        assert {r["directory_id"] for r in status} == {str(d) for d in directories.values()}
        assert sum(e["kind"] == "replica" for e in controller.events) == 3

    run(first, tmp_path, StoragePool(list("abc"), directories))

    async def again(controller):
        await settle(controller)
        assert replica_of(controller) == seen  # from the metadata log, not handed out anew
        assert not any(e["kind"] == "replica" for e in controller.events)

    run(again, tmp_path, StoragePool(list("abc"), directories))


def test_a_wiped_directory_is_a_new_replica_and_a_shared_one_is_one(tmp_path):
    directories = {n: uuid.uuid4() for n in "ab"}
    ids: dict[str, set[int]] = {}

    async def first(controller):
        await settle(controller)
        ids.update(replica_of(controller))

    run(first, tmp_path, StoragePool(list("ab"), directories))
    # Node b's disk was replaced (a new directory id); node c mounts a's directory (shared storage).
    wiped = {"a": directories["a"], "b": uuid.uuid4(), "c": directories["a"]}

    async def again(controller):
        await settle(controller)
        now = replica_of(controller)
        assert now["a"] == now["c"] == ids["a"]
        assert now["b"] == {2}  # never a used id: 0 and 1 stay the old directories'
        status = {r["replica_id"]: r["nodes"] for r in controller.status()["replicas"]}
        assert status == {min(ids["a"]): ["a", "c"], min(ids["b"]): [], 2: ["b"]}

    run(again, tmp_path, StoragePool(list("abc"), wiped))


def factors(controller) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for (topic, _), registration in controller._meta().registrations.items():
        out.setdefault(topic, set()).add(len(registration.replicas))
    return out


def test_a_cluster_of_three_data_directories_registers_every_partition_with_its_replicas(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}

    async def test(controller):
        await settle(controller)
        live = {min(ids) for ids in replica_of(controller).values()}
        outcomes = await controller.create_topics([TopicSpec("auto", 4), TopicSpec("two", 2, replication_factor=2),
                                                   TopicSpec("four", 1, replication_factor=4)])
        assert [(o.error_code, o.replication_factor) for o in outcomes[:2]] == [(ErrorCode.none, 3), (ErrorCode.none, 2)]
        assert outcomes[2].error_code == ErrorCode.invalid_replication_factor
        grown = await controller.create_partitions("two", 3)
        assert (grown.error_code, grown.replication_factor) == (ErrorCode.none, 2)
        # User topics as asked; the internal ones in one copy (ONE_COPY_INTERNAL).
        assert factors(controller) == {"auto": {3}, "two": {2}}
        assert CONSUMER_OFFSETS in controller._meta().topics and SHARE_GROUP_STATE in controller._meta().topics
        regs = controller._meta().registrations
        assert all(set(r.replicas) <= live for r in regs.values())
        assert len(regs) == 4 + 3

    run(test, tmp_path, StoragePool(list("abc"), directories))


def test_nodes_sharing_one_data_directory_keep_one_copy_unregistered(tmp_path):
    shared = uuid.uuid4()

    async def test(controller):
        await settle(controller)
        outcomes = await controller.create_topics([TopicSpec("t", 2), TopicSpec("r2", 1, replication_factor=2)])
        assert (outcomes[0].error_code, outcomes[0].replication_factor) == (ErrorCode.none, 1)
        assert outcomes[1].error_code == ErrorCode.invalid_replication_factor
        assert controller._meta().registrations == {}

    run(test, tmp_path, StoragePool(list("ab"), {"a": shared, "b": shared}))


async def with_topic(controller, *specs: TopicSpec) -> None:
    await settle(controller)
    await controller.create_topics(list(specs))
    await settle(controller)


def hosted(controller) -> dict[tuple[int, ActorKind], str]:
    return controller.reconciler.replicas.hosts


def check_led_by_leader_hosts(controller, pool) -> None:
    """Every registered partition with a leader is led by the host of its leader replica, at the
    registration's epoch, and every host was pushed the registrations of its replicas."""
    regs = controller._meta().registrations
    snapshot = controller.snapshot()
    for tp, reg in regs.items():
        kind = kind_for_topic(tp[0])
        if reg.has_leader:
            assert snapshot.leaders[tp] == (hosted(controller)[(reg.leader, kind)], reg.leader_epoch)
        else:
            assert tp not in snapshot.leaders
        for replica in reg.replicas:
            name = hosted(controller).get((replica, kind))
            if name is not None:
                push = pool.by_name(name).replicas
                assert push.replica_id == replica and push.registrations[tp] == reg


def test_the_hosts_of_leader_replicas_lead_and_every_host_knows_its_replicas(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 6))
        hosts = hosted(controller)
        # One host per data directory and kind.
        assert sorted(hosts) == sorted((r, k) for r in range(3) for k in
                                       (ActorKind.GROUP_COORDINATOR, ActorKind.SHARE_COORDINATOR, ActorKind.PARTITION_LEADER))
        check_led_by_leader_hosts(controller, pool)
        assert all(r.isr == r.replicas for r in controller._meta().registrations.values())
        # Metadata names every replica: by its node's gateway, or (a node without one) by an id
        # no gateway has; the leader only by a gateway a client can reach.
        gateways = {g.node_id for g in controller.snapshot().gateways}
        for tp, (leader, replicas, isr, offline) in controller.snapshot().replica_brokers.items():
            assert len(replicas) == len(isr) == 3 and not offline
            assert leader in gateways or leader == -1
            assert all(b in gateways or b >= 1_000_000 for b in replicas)
        with pytest.raises(KeyError, match="replicated"):
            await controller.move("t", 0, hosts[(1, ActorKind.PARTITION_LEADER)])

    run(test, tmp_path, pool)


def test_a_dead_host_leaves_the_isr_its_leaderships_go_to_in_sync_replicas_and_its_successor_is_fenced(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 6))
        regs = dict(controller._meta().registrations)
        victim = hosted(controller)[(0, ActorKind.PARTITION_LEADER)]
        pool.kill(pool.by_name(victim))
        # The pass that sees the death (its replacement on that node not up yet in it).
        await asyncio.sleep(0)
        async with controller.reconciler.lock:
            await controller.reconciler.replicas.step()
        after = controller._meta().registrations
        assert sum(reg.leader == 0 for tp, reg in regs.items() if tp[0] == "t") == 2
        for tp, reg in regs.items():
            if tp[0] != "t":
                continue
            now = after[tp]
            assert 0 not in now.isr and now.leader in now.isr and now.leader != 0
            if reg.leader == 0:
                assert now.leader_epoch == reg.leader_epoch + 1
        check_led_by_leader_hosts(controller, pool)
        await settle(controller)
        successor = hosted(controller)[(0, ActorKind.PARTITION_LEADER)]
        assert successor != victim
        # Back, in a new incarnation, but out of the ISR until a leader adds it.
        assert all(0 not in after[tp].isr for tp in after if tp[0] == "t")
        assert pool.by_name(successor).replicas.incarnation == controller.actors[successor].serial
        check_led_by_leader_hosts(controller, pool)

        # The leader adds it back with its new incarnation; the old one's fetches count for nothing.
        tp = next(tp for tp, reg in after.items() if tp[0] == "t" and 0 in reg.replicas)
        reg = controller._meta().registrations[tp]
        isr = tuple(sorted((*reg.isr, 0)))
        incarnations = lambda i0: tuple(i0 if r == 0 else -1 for r in isr)  # noqa: E731
        stale = AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, isr,
                               incarnations(controller.actors[victim].serial), 1)
        error, answered = await controller.alter_partition(tp, stale)
        assert error == ErrorCode.ineligible_replica and answered == reg
        fresh = AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, isr,
                               incarnations(controller.actors[successor].serial), 2)
        error, answered = await controller.alter_partition(tp, fresh)
        assert error == ErrorCode.none and set(answered.isr) == set(isr)
        assert controller._meta().registrations[tp] == answered
        # Sent again (its answer lost): the same answer, nothing written twice.
        assert await controller.alter_partition(tp, fresh) == (ErrorCode.none, answered)
        await controller.reconciler.replicas.idle()  # the hosts are told after the answer
        check_led_by_leader_hosts(controller, pool)

    run(test, tmp_path, pool)


def test_a_node_lost_takes_its_replicas_out_and_a_partition_with_no_live_isr_member_has_no_leader(tmp_path):
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await settle(controller)
        await controller.create_topics([TopicSpec("one", 3, replication_factor=1), TopicSpec("three", 3)])
        await settle(controller)
        lost = pool.by_name(hosted(controller)[(2, ActorKind.PARTITION_LEADER)]).node_id
        pool.remove_node(lost)
        controller.reconciler.membership.polled_at = -1e9  # poll the nodes in the next pass
        await settle(controller)
        regs = controller._meta().registrations
        assert sum(reg.replicas == (2,) for reg in regs.values()) == 1
        for tp, reg in regs.items():
            if reg.replicas == (2,):
                # Its only replica is gone: no leader, not in the map, its claim kept for its return.
                assert not reg.has_leader and reg.isr == (2,)
            else:
                assert 2 not in reg.isr and reg.has_leader
        check_led_by_leader_hosts(controller, pool)
        assert {r["replica_id"]: r["nodes"] for r in controller.status()["replicas"]}[2] == []

    run(test, tmp_path, pool)


def test_a_host_taken_over_at_once_on_its_node_is_still_a_restart(tmp_path):
    """Two partition leaders a node: when the host dies the other takes its replicas over in the
    same pass, so the replicas never look absent; the new incarnation alone must fence them (its
    logs were opened anew, and what the old process had not made durable may be missing)."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 6))
        victim = hosted(controller)[(0, ActorKind.PARTITION_LEADER)]
        pool.kill(pool.by_name(victim))
        await asyncio.sleep(0)
        async with controller.reconciler.lock:
            await controller.reconciler.replicas.step()
        successor = hosted(controller)[(0, ActorKind.PARTITION_LEADER)]
        assert successor != victim and controller.actors[successor].node_id == controller.actors[victim].node_id
        regs = controller._meta().registrations
        assert all(0 not in reg.isr for tp, reg in regs.items() if tp[0] == "t")
        check_led_by_leader_hosts(controller, pool)

    run(test, tmp_path, pool, **{"raygroups.partition.leaders": 6})


def test_partitions_in_one_copy_stay_in_the_controllers_data_directory(tmp_path):
    """Where nodes keep their own directories, what has no replicas (here the internal topics,
    kept in one copy by ONE_COPY_INTERNAL) is led only by actors of the controller's node: a move to another node would leave its log
    behind on a disk the new leader cannot read."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await settle(controller)
        await controller.create_topics([TopicSpec("t", 3)])
        await settle(controller)
        regs = controller._meta().registrations
        single = {tp: name for tp, name in controller.leaders.items() if tp not in regs}
        assert {tp[0] for tp in single} == {CONSUMER_OFFSETS, SHARE_GROUP_STATE}
        assert {controller.actors[name].node_id for name in single.values()} == {"a"}
        # A node that is not the controller's leaves: nothing in one copy was there to move.
        pool.remove_node("b")
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        assert {controller.actors[controller.leaders[tp]].node_id for tp in single} == {"a"}
        assert all(tp in controller.leaders for tp in single)

    run(test, tmp_path, pool)


def test_a_host_that_stops_answering_is_fenced_and_its_leaderships_elected_elsewhere(tmp_path):
    """A paused process is alive to Ray: only its silence tells (Kafka's session timeout)."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)
    clock = FakeClock()

    async def test(controller):
        keeper = controller.reconciler.replicas
        await with_topic(controller, TopicSpec("t", 6))
        assert not await keeper.probe()
        victim = hosted(controller)[(1, ActorKind.PARTITION_LEADER)]
        led = {tp for tp, reg in controller._meta().registrations.items() if tp[0] == "t" and reg.leader == 1}
        assert led
        pool.by_name(victim).paused = True
        clock.now += 5  # within the session: nothing yet
        assert not await keeper.probe() and not keeper.fenced
        clock.now += 5  # 10 s without an answer, past the 9 s session
        assert await keeper.probe() and keeper.fenced == {victim}
        await settle(controller)
        regs = controller._meta().registrations
        assert all(regs[tp].leader != 1 and 1 not in regs[tp].isr for tp in led)
        assert all(controller.leaders[tp] != victim for tp in led)
        pushed = pool.by_name(victim).replicas
        assert all(pushed.registrations[tp].leader == 1 for tp in led)  # it was told nothing since
        # It answers again, in the same incarnation: pushed that it follows, out of the ISR until
        # the leader adds it back.
        pool.by_name(victim).paused = False
        clock.now += 1
        assert await keeper.probe() and not keeper.fenced
        await settle(controller)
        pushed = pool.by_name(victim).replicas
        assert pushed.incarnation == controller.actors[victim].serial
        assert all(pushed.registrations[tp] == controller._meta().registrations[tp] for tp in led)
        assert all(1 not in controller._meta().registrations[tp].isr for tp in led)
        assert {e["kind"] for e in controller.events} >= {"fenced", "unfenced"}
        # Its leaders add it back once it caught up; at the next preferred leader election (every
        # leader.imbalance.check.interval.seconds) it leads what placement gave it again.
        for tp in led:
            reg = controller._meta().registrations[tp]
            isr = (*reg.isr, 1)
            serials = tuple(-1 if r != 1 else controller.actors[victim].serial for r in isr)
            error, _ = await controller.alter_partition(tp, AlterPartition(reg.leader, reg.leader_epoch,
                                                                           reg.partition_epoch, isr, serials, 1))
            assert error == ErrorCode.none
        await settle(controller)
        assert all(controller._meta().registrations[tp].leader != 1 for tp in led)  # not yet due
        clock.now += 300
        await settle(controller)
        regs = controller._meta().registrations
        assert all(regs[tp].leader == 1 and controller.leaders[tp] == victim for tp in led)
        check_led_by_leader_hosts(controller, pool)
        # Every change of leader is on the record, with its cause, as the experiments read them.
        moves = [c for c in controller.reconciler.changes if (c.topic, c.partition) in led]
        assert [c.cause.value for c in moves if c.previous == victim] == ["failover"] * len(led)
        assert [c.cause.value for c in moves if c.actor == victim and c.previous] == ["balance"] * len(led)
        assert all(c.began <= c.released <= c.loaded for c in moves if c.loaded is not None)

    run(test, tmp_path, pool, clock)


def test_a_host_slow_to_answer_is_alive_its_answer_counts_when_it_comes(tmp_path):
    """A ping answered after the heartbeat interval (a loaded machine, a node starting beside the
    host) still shows the host alive when the answer comes, as Kafka's controller counts a
    heartbeat when it arrives: only a host silent for the whole session is fenced. Pings cut at
    the heartbeat fenced every host of a starved machine at once (a CI run saw every partition
    without a leader)."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)
    clock = FakeClock()

    async def test(controller):
        keeper = controller.reconciler.replicas
        await with_topic(controller, TopicSpec("t", 6))
        assert not await keeper.probe()
        slow = hosted(controller)[(1, ActorKind.PARTITION_LEADER)]
        pool.by_name(slow).slow = asyncio.Event()
        clock.now += 5
        assert not await keeper.probe() and not keeper.fenced  # its ping is under way
        clock.now += 3
        pool.by_name(slow).slow.set()  # answered 8 s after the last answer, within the 9 s session
        await keeper._pings[slow]
        clock.now += 5  # 13 s since the ping was sent, 5 since it was answered
        assert not await keeper.probe() and not keeper.fenced
        pool.by_name(slow).slow = asyncio.Event()  # silent from now on
        assert not await keeper.probe()
        clock.now += 10
        await keeper.probe()  # (the controller's own probing may have seen it first)
        assert keeper.fenced == {slow}

    # Probes wait a heartbeat (real time) for pings under way: a short one keeps the test quick.
    run(test, tmp_path, pool, clock=clock, **{"broker.heartbeat.interval.ms": 50})


def test_a_replica_gone_for_good_is_copied_to_a_live_directory_and_leaves_once_it_is_in_sync(tmp_path):
    """A node lost (or back with a wiped disk: a new replica) for raygroups.replica.replace.after.ms:
    its partitions are reassigned to live directories (KIP-455) and the replication factor restored."""
    directories = {n: uuid.uuid4() for n in "abcd"}
    pool = StoragePool(list("abcd"), directories)
    clock = FakeClock()

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 4, replication_factor=3))
        keeper = controller.reconciler.replicas
        node_of = {min(ids): node for node, ids in replica_of(controller).items()}
        gone = next(r for r, node in node_of.items() if node != "a")
        hit = {tp for tp, reg in controller._meta().registrations.items() if gone in reg.replicas}
        assert hit
        pool.remove_node(node_of[gone])
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        assert all(gone in controller._meta().registrations[tp].replicas for tp in hit)  # not yet
        assert keeper.missing_since[gone] == clock.now and keeper.next_due() <= clock.now + 600
        clock.now += 600
        await settle(controller)
        regs = controller._meta().registrations
        for tp in hit:
            reg = regs[tp]
            assert reg.removing == (gone,) and len(reg.adding) == 1 and reg.adding[0] != gone
            assert len(reg.target_replicas) == 3 and gone not in reg.target_replicas
        # The new replica's host was told; once its leader adds it to the ISR, the move completes.
        for tp in hit:
            reg = regs[tp]
            (new,) = reg.adding
            host = hosted(controller)[(new, ActorKind.PARTITION_LEADER)]
            assert pool.by_name(host).replicas.registrations[tp] == reg
            isr = (*reg.isr, new)
            serials = tuple(controller.actors[host].serial if r == new else -1 for r in isr)
            error, done = await controller.alter_partition(
                tp, AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, isr, serials, 1))
            assert error == ErrorCode.none and not done.reassigning
            assert gone not in done.replicas and len(done.replicas) == 3 and set(done.isr) == set(done.replicas)
        await keeper.idle()
        assert gone in keeper.replaced and keeper.next_due() > clock.now  # not woken for it again
        check_led_by_leader_hosts(controller, pool)

    run(test, tmp_path, pool, clock)


def test_a_node_that_joins_gets_copies_of_existing_partitions_a_wave_at_a_time(tmp_path):
    """Balancing by reassignment (raygroups.replica.balance.max.moves): a node that joins a cluster
    whose partitions all have their replicas gets copies of them, in waves, each starting once
    the one before completed, until the replicas per data directory are within one of even; a
    leader's place moved with its copy makes the new node lead its share."""
    directories = {n: uuid.uuid4() for n in "abcd"}
    pool = StoragePool(list("abc"), directories)

    async def complete(controller, new: int) -> None:
        """Each moving partition's leader adds the new replica to the ISR: the move completes."""
        for tp, reg in controller._meta().registrations.items():
            if not reg.reassigning:
                continue
            assert reg.adding == (new,) and len(reg.removing) == 1
            host = hosted(controller)[(new, ActorKind.PARTITION_LEADER)]
            assert pool.by_name(host).replicas.registrations[tp] == reg  # it was told, to fetch
            isr = (*reg.isr, new)
            serials = tuple(controller.actors[host].serial if r == new else -1 for r in isr)
            error, done = await controller.alter_partition(
                tp, AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, isr, serials, 1))
            assert error == ErrorCode.none and not done.reassigning and new in done.replicas

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 6, replication_factor=3))
        keeper = controller.reconciler.replicas
        assert not any(reg.reassigning for reg in controller._meta().registrations.values())  # even already
        pool.alive_nodes.append("d")
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        new = max(replica_of(controller)["d"])
        waves = 0
        while moving := [tp for tp, reg in controller._meta().registrations.items() if reg.reassigning]:
            assert len(moving) <= 2  # the wave's bound
            waves += 1
            await complete(controller, new)
            await keeper.idle()
            await settle(controller)
        regs = controller._meta().registrations
        ids = {rid for node_ids in replica_of(controller).values() for rid in node_ids}
        held = {r: sum(r in reg.replicas for reg in regs.values()) for r in ids}
        assert held[new] == 4 and max(held.values()) - min(held.values()) <= 1 and waves == 2
        assert not keeper.balance_wanted  # even: an operator's placement is left alone until a node joins
        led = {r: sum(reg.leader == r for reg in regs.values()) for r in held}
        assert led[new] >= 1 and max(led.values()) - min(led.values()) <= 1
        assert all(len(reg.replicas) == 3 and set(reg.isr) == set(reg.replicas) for reg in regs.values())
        check_led_by_leader_hosts(controller, pool)
        events = [e["kind"] for e in controller.status()["events"]]
        assert "reassign" in events

    run(test, tmp_path, pool, **{"raygroups.replica.balance.max.moves": 2})


def test_an_operator_moves_a_replica_cancels_a_move_and_is_told_what_is_wrong(tmp_path):
    """AlterPartitionReassignments and ListPartitionReassignments (KIP-455) at the controller, in
    broker ids (this pool has no gateways: each replica is named 1_000_000 + its id, as Metadata
    names a replica whose node has no gateway)."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)
    base = 1_000_000

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 3, replication_factor=2))
        tp = ("t", 0)
        reg = controller._meta().registrations[tp]
        (spare,) = {min(ids) for ids in replica_of(controller).values()} - set(reg.replicas)
        keeper = controller.reconciler.replicas
        first, second = reg.replicas
        target = [base + spare, base + second]
        assert await controller.alter_partition_reassignments([("t", 0, target)]) == [(0, None)]
        moving = controller._meta().registrations[tp]
        assert moving.adding == (spare,) and moving.removing == (first,) and moving.replicas == (spare, second, first)
        assert controller.list_partition_reassignments(None) == [
            ("t", 0, [base + spare, base + second, base + first], [base + spare], [base + first])]
        assert controller.list_partition_reassignments([("t", [1, 2])]) == []
        await keeper.idle()
        host = hosted(controller)[(spare, ActorKind.PARTITION_LEADER)]
        assert pool.by_name(host).replicas.registrations[tp] == moving  # told, to fetch

        # Cancelled: the replica being added leaves; the original assignment stands.
        assert await controller.alter_partition_reassignments([("t", 0, None)]) == [(0, None)]
        back = controller._meta().registrations[tp]
        # (in the order the move left them, as Kafka's PartitionReassignmentRevert keeps it)
        assert back.replicas == (second, first) and not back.reassigning and spare not in back.isr
        assert controller.list_partition_reassignments(None) == []
        assert await controller.alter_partition_reassignments([("t", 0, None)]) == [
            (ErrorCode.no_reassignment_in_progress.value, "no reassignment of the partition is in progress")]

        # What is refused, and why; nothing changes.
        answers = await controller.alter_partition_reassignments(
            [("t", 0, [base + spare, base + spare]), ("t", 1, [7]), ("t", 9, [base + first]), ("u", 0, None),
             ("t", 2, [base + spare])],
            allow_replication_factor_change=False,
        )
        assert [code for code, _ in answers] == [
            ErrorCode.invalid_replica_assignment.value, ErrorCode.invalid_replica_assignment.value,
            ErrorCode.unknown_topic_or_partition.value, ErrorCode.unknown_topic_or_partition.value,
            ErrorCode.invalid_replication_factor.value]
        assert "broker 7 keeps no replica" in answers[1][1] and "from 2 to 1" in answers[4][1]
        assert controller._meta().registrations[tp] == back

        # Moved for real: once the leader adds the new replica to the ISR the old one leaves.
        keeper.balance_wanted = True
        assert await controller.alter_partition_reassignments([("t", 0, target)]) == [(0, None)]
        assert not keeper.balance_wanted  # the operator took over: no balancing until a node joins
        reg = controller._meta().registrations[tp]
        isr = (*reg.isr, spare)
        serials = tuple(controller.actors[host].serial if r == spare else -1 for r in isr)
        error, done = await controller.alter_partition(
            tp, AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, isr, serials, 1))
        assert error == ErrorCode.none and done.replicas == (spare, second) and not done.reassigning
        await keeper.idle()
        check_led_by_leader_hosts(controller, pool)

    run(test, tmp_path, pool, **{"raygroups.replica.balance.max.moves": 0})


def test_a_move_to_a_node_that_is_lost_for_good_is_cancelled_and_a_new_node_is_balanced_onto(tmp_path):
    """Balancing starts copies to a node that joined; the node is then lost for good
    (raygroups.replica.replace.after.ms): its moves would never complete and would hold every
    other move, so they are cancelled, the original replicas stay. A host coming up for a data
    directory with none of its kind's replicas asks for balancing; one already holding some
    does not."""
    directories = {n: uuid.uuid4() for n in "abcd"}
    pool = StoragePool(list("abc"), directories)
    clock = FakeClock()

    async def test(controller):
        await with_topic(controller, TopicSpec("t", 6, replication_factor=3))
        keeper = controller.reconciler.replicas
        before = {tp: reg.replicas for tp, reg in controller._meta().registrations.items()}
        pool.alive_nodes.append("d")
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        new = max(replica_of(controller)["d"])
        moving = [tp for tp, reg in controller._meta().registrations.items() if reg.reassigning]
        assert moving and all(controller._meta().registrations[tp].adding == (new,) for tp in moving)
        pool.remove_node("d")
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        clock.now += 600
        await settle(controller)
        regs = controller._meta().registrations
        assert not any(reg.reassigning for reg in regs.values())
        assert {tp: tuple(sorted(reg.replicas)) for tp, reg in regs.items()} == {
            tp: tuple(sorted(r)) for tp, r in before.items()}
        assert any(e["kind"] == "reassign" and "cancelled" in e["message"] for e in controller.status()["events"])

        keeper.balance_wanted = False
        held = next(iter(regs.values())).replicas[0]
        keeper._joined({(held, ActorKind.PARTITION_LEADER)})
        assert not keeper.balance_wanted  # a host back for a directory that keeps replicas
        keeper._joined({(new, ActorKind.PARTITION_LEADER)})
        assert keeper.balance_wanted  # one with none: a node that joined

    run(test, tmp_path, pool, clock, **{"raygroups.replica.balance.max.moves": 2})


# -- the internal topics adopted into replication -------------------------------------------------

REPLICATED_INTERNAL = {"offsets.topic.replication.factor": 3, "share.coordinator.state.topic.replication.factor": 3}


def internal_partitions(controller) -> list[tuple[str, int]]:
    return sorted(tp for tp in controller._meta().leader_epochs if tp[0] in (CONSUMER_OFFSETS, SHARE_GROUP_STATE))


async def adopt_all(controller) -> None:
    for _ in range(3):  # ADOPT_PER_PASS a pass; SMALL has 5 internal partitions
        async with controller.reconciler.lock:
            await controller.reconciler.replicas.step()


def test_internal_partitions_in_one_copy_are_adopted_into_replication_from_the_controllers_directory(tmp_path):
    """The internal topics are made on the first start in the controller's directory, in one copy.
    With coordinators on three data directories each partition is unloaded from its one leader,
    registered leading there (its log is there) at an epoch above every one it had, and
    reassigned at once to three replicas: the others fetch its log, then the move completes and
    its preferred replica leads."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await settle(controller)
        await adopt_all(controller)
        meta = controller._meta()
        home = min(replica_of(controller)["a"])
        everyone = {min(ids) for ids in replica_of(controller).values()}
        internal = internal_partitions(controller)
        assert len(internal) == 5 and all(tp in meta.registrations for tp in internal)
        for tp in internal:
            reg = meta.registrations[tp]
            assert (reg.leader, reg.isr, reg.leader_epoch) == (home, (home,), meta.leader_epochs[tp] + 1)
            assert set(reg.replicas) == everyone and set(reg.adding) == everyone - {home}
            # No actor serves the one copy any more: its host in the directory does, as a replica.
            assert not any(tp in actor.loaded for actor in pool.spawned)
        check_led_by_leader_hosts(controller, pool)
        # The copies catch up and join: each move completes, three in-sync replicas.
        for tp in internal:
            reg = controller._meta().registrations[tp]
            kind = kind_for_topic(tp[0])
            serials = tuple(controller.actors[hosted(controller)[(r, kind)]].serial for r in reg.replicas)
            error, done = await controller.alter_partition(
                tp, AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, serials, 1))
            assert error == ErrorCode.none and not done.reassigning and set(done.isr) == everyone
        await controller.reconciler.replicas.idle()
        await settle(controller)
        # Each completed adoption elects its preferred replica at once (not at the next periodic
        # election): the leaders spread as placement put them, not all in the controller's node.
        regs = controller._meta().registrations
        assert all(regs[tp].leader == regs[tp].replicas[0] for tp in internal)
        assert len({regs[tp].leader for tp in internal}) == 3
        assert not controller.reconciler.replicas.adopted
        check_led_by_leader_hosts(controller, pool)
        assert "reassign" in [e["kind"] for e in controller.status()["events"]]

    run(test, tmp_path, pool, **REPLICATED_INTERNAL)


def test_an_operators_move_that_waited_for_an_adoption_is_refused(tmp_path, monkeypatch):
    """An operator's move of an internal partition in one copy waits for the reconciler's lock; a
    pass holding it adopts the partition into replication. The move is then refused (a replicated
    partition moves only by reassignment), never loading the one old copy beside its replicas."""
    monkeypatch.setattr("cluster.control.replica_keeper.ADOPT_PER_PASS", 1)  # the rest wait their turn
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    async def test(controller):
        await settle(controller)
        tp = next(tp for tp in internal_partitions(controller) if tp not in controller._meta().registrations)
        other = next(e.name for e in controller.actors.values()
                     if e.kind is kind_for_topic(tp[0]) and e.alive and e.name != controller.leaders[tp])
        async with controller.reconciler.lock:
            move = asyncio.ensure_future(controller.move(*tp, other))
            await asyncio.sleep(0)  # the move waits for the lock
            for _ in range(len(internal_partitions(controller))):
                if tp in controller._meta().registrations:
                    break
                await join_all(controller)  # the adopted ones in sync: the next ones' turn
                await controller.reconciler.replicas.step()
            assert tp in controller._meta().registrations
        with pytest.raises(KeyError, match="replicated"):
            await move
        assert not any(tp in actor.loaded for actor in pool.spawned)  # served only by its replicas' hosts

    run(test, tmp_path, pool, **REPLICATED_INTERNAL)


def test_internal_partitions_are_adopted_once_three_directories_have_coordinators_and_not_at_factor_one(tmp_path):
    """A head started alone keeps its internal topics in one copy. With a second directory they
    stay so: two copies with min.insync.replicas 2 would stop every group at either node's loss.
    A third brings the adoption, at three copies. At offsets.topic.replication.factor 1 the
    consumer offsets stay in one copy all along."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(["a"], directories)

    async def join(node: str) -> None:
        pool.alive_nodes.append(node)
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        await adopt_all(controller)

    async def test(c):
        nonlocal controller
        controller = c
        await settle(controller)
        await adopt_all(controller)
        assert not controller._meta().registrations  # one directory: nothing to replicate to
        await join("b")
        assert not controller._meta().registrations
        await join("c")
        regs = controller._meta().registrations
        internal = internal_partitions(controller)
        assert {tp for tp in internal if tp in regs} == {tp for tp in internal if tp[0] == SHARE_GROUP_STATE}
        assert all(len(regs[tp].replicas) == 3 for tp in regs)
        single = {tp: name for tp, name in controller.leaders.items() if tp not in regs}
        assert set(single) == {tp for tp in internal if tp[0] == CONSUMER_OFFSETS}
        assert {controller.actors[name].node_id for name in single.values()} == {"a"}

    controller = None
    run(test, tmp_path, pool, **{"offsets.topic.replication.factor": 1,
                                 "share.coordinator.state.topic.replication.factor": 3})


async def join_all(controller) -> None:
    """Each moving internal partition's leader takes its new copies into the ISR: the moves complete."""
    for tp, reg in controller._meta().registrations.items():
        if not reg.reassigning:
            continue
        kind = kind_for_topic(tp[0])
        serials = tuple(controller.actors[hosted(controller)[(r, kind)]].serial for r in reg.replicas)
        # A new request each time (its sequence): the same one again is answered as a retry.
        error, done = await controller.alter_partition(
            tp, AlterPartition(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, serials,
                               reg.partition_epoch))
        assert error == ErrorCode.none and not done.reassigning
    await controller.reconciler.replicas.idle()


def test_internal_partitions_adopted_below_their_factor_get_the_missing_copies_when_a_directory_joins(tmp_path):
    """Adopted with two directories (min.insync.replicas 1), the share state has two copies; a
    third node's coordinators bring it to three (share.coordinator.state.topic.replication.factor 3) by reassignment."""
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(["a", "b"], directories)

    async def test(controller):
        await settle(controller)
        await adopt_all(controller)
        await join_all(controller)
        regs = controller._meta().registrations
        assert regs and all(len(reg.replicas) == 2 and not reg.reassigning for reg in regs.values())
        pool.alive_nodes.append("c")
        controller.reconciler.membership.polled_at = -1e9
        await settle(controller)
        await adopt_all(controller)
        new = min(replica_of(controller)["c"])
        regs = controller._meta().registrations
        assert all(reg.adding == (new,) and len(reg.replicas) == 3 for reg in regs.values())
        await join_all(controller)
        regs = controller._meta().registrations
        assert all(len(reg.replicas) == len(reg.isr) == 3 for reg in regs.values())
        check_led_by_leader_hosts(controller, pool)

    # min.insync.replicas 1: two copies keep a group going through one node's loss, so two
    # directories are enough to adopt at two.
    run(test, tmp_path, pool, **{"offsets.topic.replication.factor": 1, "min.insync.replicas": 1,
                                 "share.coordinator.state.topic.replication.factor": 3})


def test_adoption_goes_on_only_once_the_partitions_adopted_last_have_a_copy_in_sync(tmp_path, monkeypatch):
    """An adopted partition refuses writes until a copy is in sync (its ISR is below
    min.insync.replicas): the next ones wait for that, so that few refuse writes at a time."""
    monkeypatch.setattr("cluster.control.replica_keeper.ADOPT_PER_PASS", 2)
    directories = {n: uuid.uuid4() for n in "abc"}
    pool = StoragePool(list("abc"), directories)

    def adopted(controller) -> dict[str, int]:
        regs = controller._meta().registrations
        return {topic: sum(tp in regs for tp in internal_partitions(controller) if tp[0] == topic)
                for topic in (CONSUMER_OFFSETS, SHARE_GROUP_STATE)}

    async def test(controller):
        await settle(controller)
        first = adopted(controller)
        assert all(0 < n <= 2 for n in first.values())  # each kind's first two
        await adopt_all(controller)
        assert adopted(controller) == first  # waiting for their copies
        await join_all(controller)
        await adopt_all(controller)
        then = adopted(controller)
        assert all(first[t] < then[t] <= first[t] + 2 or then[t] == len(
            [tp for tp in internal_partitions(controller) if tp[0] == t]) for t in then)
        assert sum(then.values()) > sum(first.values())

    run(test, tmp_path, pool, **REPLICATED_INTERNAL)
