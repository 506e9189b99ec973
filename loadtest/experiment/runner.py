"""`raygroups experiment`: run a scenario's load against a cluster, inject its faults, record it.

Phases (each a `phase` row):
- start: the cluster (`raygroups up` as a child process, unless `--bootstrap` names a running
  one), the topics, the monitor;
- load: members and producers start spread over `ramp_s`, classic and consumer groups churn if asked, faults
  fire at their `at_s`, for `duration_s`;
- drain: producers stop and flush, the end offsets are read, and the run waits (up to
  `checks.drain_timeout_s`) until every group has read to the end (classic and consumer groups:
  committed offsets, share: durable start offsets), each group's progress a `drained` row;
- end: members leave, the cluster stops, its coordinator records are decoded, `run.json` is
  written and the invariant checker gives its verdicts.
A cluster that dies mid-run (not by a scheduled restart) ends the load early; everything seen so
far is still written and checked, with `status: cluster-died`.
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from rich.console import Console
from rich.live import Live

from cluster.gateway.apis import ApiKey
from loadtest.drivers.aio import AsyncioDriver
from loadtest.experiment import rundir
from loadtest.experiment.cluster_process import ClusterProcess, ClusterStartError
from loadtest.experiment.eventlog import EventLog
from loadtest.experiment.fault_kinds import KINDS, FaultError
from loadtest.experiment.faults import Admin, FaultInjector, Injected
from loadtest.experiment.leadership import LeadershipRecorder
from loadtest.experiment.live import LiveStats, render
from loadtest.experiment.monitor import Monitor
from loadtest.experiment.population import Population
from loadtest.experiment.node_join import join_workers, report_spread, wait_spread
from loadtest.experiment.recovery import RecoveryWatch
from loadtest.experiment.scenario import GroupSpec, Scenario
from loadtest.members.machine import Broker, Machine, parse_bootstrap

# An experiment's cluster, unless the scenario says otherwise: groups settle fast, share groups
# read from the beginning, and share and consumer-protocol members hear of their assignments
# within a second.
DEFAULT_SETTINGS: dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 1_000,
    "share.auto.offset.reset": "earliest",
    "group.share.heartbeat.interval.ms": 1_000,
    "group.share.record.lock.duration.ms": 15_000,
    "group.consumer.heartbeat.interval.ms": 1_000,
}
# Written to run.json with the cluster's defaults where the scenario leaves them: the checker
# judges by them (loadtest/check/runinfo.py).
CHECKED_SETTINGS = {
    "group.share.delivery.count.limit": 5,
    "group.share.record.lock.duration.ms": 30_000,
    "offsets.topic.num.partitions": 50,
    "share.coordinator.state.topic.num.partitions": 50,
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
}


def wall_ms() -> float:
    return time.time() * 1000.0


def iso(ms: float) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat()


@dataclass
class RunOutcome:
    run_dir: Path
    status: str
    wall_s: float
    notes: list[str] = field(default_factory=list)
    crashes: list[tuple[str, str]] = field(default_factory=list)
    faults: list[Injected] = field(default_factory=list)
    recovered_ms: dict[int, float] = field(default_factory=dict)
    stats: LiveStats | None = None


class Experiment:
    def __init__(self, scenario: Scenario, run_dir: Path, scenario_text: str, bootstrap: str | None = None,
                 console: Console | None = None) -> None:
        self.scenario = scenario
        self.run_dir = Path(run_dir)
        self.scenario_text = scenario_text
        self.external_bootstrap = bootstrap
        self.console = console or Console()
        self.settings = {**DEFAULT_SETTINGS, **scenario.cluster.config}
        self.notes: list[str] = []
        self.faults: list[Injected] = []
        self.stats = LiveStats()
        self.phase = "start"
        self.cluster: ClusterProcess | None = None
        self.workers: list[str] = []  # the Ray worker nodes this run added (several-node scenarios)
        self._restarting = False
        self._died = False
        self._stop = asyncio.Event()

    # -- the event stream -----------------------------------------------------------------------

    def _sink(self, rows: list[dict[str, Any]]) -> None:
        self.events.extend(rows)
        self.stats.observe(rows)
        self.recovery.observe(rows)

    def emit(self, row: dict[str, Any]) -> None:
        self._sink([row])

    def _phase(self, name: str) -> None:
        self.phase = name
        self.emit({"time": wall_ms(), "kind": "phase", "role": "runner", "state": name})

    # -- the run ----------------------------------------------------------------------------------

    async def run(self) -> RunOutcome:
        started = wall_ms()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / rundir.SCENARIO_COPY).write_text(self.scenario_text)
        self.events = EventLog(self.run_dir, background=True)
        self.recovery = RecoveryWatch(self.emit)
        self.leadership: LeadershipRecorder | None = None
        info: dict[str, Any] = self._run_info(started, "running", bootstrap=None, topics=[])
        rundir.write_run_info(self.run_dir, info)
        status = "complete"
        driver: AsyncioDriver | None = None
        topics: list[dict[str, Any]] = []
        try:
            self._phase("start")
            bootstrap = await self._start_cluster()
            info["cluster"]["bootstrap"] = bootstrap
            brokers = parse_bootstrap(bootstrap)
            driver = AsyncioDriver(sink=self._sink, client_id="raygroups-experiment")
            topics = await self._create_topics(driver, brokers)
            if self.workers and self.scenario.cluster.storage == "per-node":
                # Their replicas were placed with the topics: wait for every node to lead its share.
                with self.console.status("waiting for every node to lead its share of the partitions…"):
                    spread = await wait_spread(Admin(bootstrap), self.workers)
                report_spread(spread, len(self.workers), self.console, self.notes)
            info["topics"] = topics
            rundir.write_run_info(self.run_dir, info)
            population = Population(self.scenario, brokers)
            monitor = Monitor(driver, brokers, list(population.classic), list(population.share), self.emit,
                              consumer=list(population.consumer))
            stop_monitor = asyncio.Event()
            monitor_task = asyncio.create_task(monitor.run(stop_monitor))
            self.leadership = LeadershipRecorder(Admin(bootstrap).call, self.recovery.leadership_changed, started)
            await self.leadership.poll()  # before any fault: whether the cluster records changes
            leadership_task = asyncio.create_task(self.leadership.run(stop_monitor))
            status = await self._load(driver, population, bootstrap)
            if status == "complete":
                await self._drain(driver, population, monitor)
            self._phase("end")
            await asyncio.gather(*(driver.stop(m, timeout_s=10) for m in population.everyone()))
            stop_monitor.set()
            await monitor_task
            await leadership_task
            await self.leadership.poll()  # the last changes, before the cluster stops
        except (ClusterStartError, FaultError) as exc:
            status = "cluster-died" if self.cluster is not None and self.cluster.starts else "not-started"
            self.notes.append(str(exc))
        except asyncio.CancelledError:
            status = "interrupted"
        finally:
            crashes = driver.crashes if driver is not None else []
            if crashes:
                self.notes.append(f"{len(crashes)} simulated client(s) stopped on a bug in the load client: "
                                  f"first {crashes[0][0]}: {crashes[0][1].strip().splitlines()[-1]}")
            self.events.close()
            if self.leadership is not None:
                self.leadership.write(self.run_dir)
                if not self.leadership.available:
                    self.notes.append("the cluster does not record its leadership changes (an older raygroups): "
                                      "the checker falls back to the fault schedule")
            await self._finish_cluster(topics)
            info = self._run_info(started, status, info["cluster"]["bootstrap"], topics)
            rundir.write_run_info(self.run_dir, info)
        return RunOutcome(self.run_dir, status, (wall_ms() - started) / 1000, self.notes, crashes, self.faults,
                          dict(self.recovery.recovered), self.stats)

    def _run_info(self, started: float, status: str, bootstrap: str | None, topics: list[dict[str, Any]]) -> dict[str, Any]:
        settings = {**CHECKED_SETTINGS, **self.settings}
        return {
            "format": 1,
            "scenario": self.scenario.to_dict(),
            "cluster": {"bootstrap": bootstrap, "embedded": self.external_bootstrap is None, "settings": settings,
                        "data_dir": str(self.run_dir / "data") if self.external_bootstrap is None else None},
            "topics": topics,
            "groups": {
                "classic": {g: list(s.topics) for g, s in self.scenario.classic_groups().items()},
                "consumer": {g: list(s.topics) for g, s in self.scenario.consumer_groups().items()},
                "share": {g: list(s.topics) for g, s in self.scenario.share_group_specs().items()},
            },
            "started": iso(started),
            "ended": iso(wall_ms()) if status != "running" else None,
            "status": status,
            "notes": list(self.notes),
            "faults": [{"fault_id": f.fault_id, "action": f.spec.action, "target": f.target, "at": iso(f.started_ms),
                        "ended": iso(f.ended_ms) if f.ended_ms else None} for f in self.faults],
        }

    async def _start_cluster(self) -> str:
        if self.external_bootstrap is not None:
            return self.external_bootstrap
        self.cluster = ClusterProcess(self.run_dir, self.scenario.cluster, self.settings)
        nodes = f" on {self.scenario.cluster.nodes} Ray nodes" if self.scenario.cluster.nodes > 1 else ""
        with self.console.status(f"starting a raygroups cluster{nodes} (Ray and its actors)…"):
            self.cluster.start_nodes()
            bootstrap = await asyncio.to_thread(self.cluster.start)
        if self.cluster.nodes is not None:
            self.workers = await join_workers(self.cluster.nodes, Admin(bootstrap), self.console, self.notes,
                                              per_node=self.scenario.cluster.storage == "per-node")
        self.console.print(f"cluster ready at [bold]{bootstrap}[/] (data in {self.cluster.data_dir})")
        return bootstrap

    async def _create_topics(self, driver: AsyncioDriver, brokers: list[Broker]) -> list[dict[str, Any]]:
        # -1: the cluster's default.replication.factor (one copy on one data directory; three
        # replicas where three nodes keep their own).
        specs = [{"name": t.name, "num_partitions": t.partitions, "replication_factor": -1, "assignments": [],
                  "configs": []} for t in self.scenario.topics]
        if specs:
            response = await driver.call(brokers[0], ApiKey.CREATE_TOPICS, 7, {"topics": specs, "timeout": 30_000,
                                                                              "validate_only": False})
            if response is None:
                raise ClusterStartError("CreateTopics got no answer")
            for t in response.topics:
                if t.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
                    raise ClusterStartError(f"creating topic {t.name}: {t.error_code.name} {t.error_message or ''}")
                if t.error_code == ErrorCode.topic_already_exists:
                    self.notes.append(f"topic {t.name} existed before the run: records from before it are read too")
        body = {"topics": [{"name": t.name, "topic_id": None} for t in self.scenario.topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        response = await driver.call(brokers[0], ApiKey.METADATA, 12, body)
        return [{"name": t.name, "topic_id": str(t.topic_id), "partitions": len(t.partitions)}
                for t in (response.topics if response else ())]

    # -- load ---------------------------------------------------------------------------------------

    async def _load(self, driver: AsyncioDriver, population: Population, bootstrap: str) -> str:
        self._phase("load")
        duration = self.scenario.duration_s
        load_started = time.monotonic()
        rng = random.Random(self.scenario.seed)
        everyone = population.everyone()
        order = list(everyone)
        rng.shuffle(order)
        tasks = [asyncio.create_task(self._ramp(driver, order))]
        injector = FaultInjector(self.scenario, Admin(bootstrap), self.scenario.seed)
        tasks += [asyncio.create_task(self._fault(injector, i, load_started)) for i in range(len(self.scenario.faults))]
        churning = {**self.scenario.classic_groups(), **self.scenario.consumer_groups()}
        tasks += [asyncio.create_task(self._churn(driver, population, g, spec, rng))
                  for g, spec in churning.items() if spec.churn_every_s > 0]
        status = "complete"
        with Live(console=self.console, refresh_per_second=4, transient=False) as live:
            while True:
                elapsed = time.monotonic() - load_started
                self.stats.sample()
                done = sum(1 for f in self.faults if f.ended_ms is not None or KINDS[f.spec.action].over_once_injected)
                live.update(render(self.stats, "load", elapsed, duration, population.readiness(), done,
                                   len(self.scenario.faults)))
                if elapsed >= duration:
                    break
                if self.cluster is not None and not self._restarting and not self.cluster.alive():
                    self._died = True
                    status = "cluster-died"
                    self.notes.append(f"the cluster process exited during the load at {elapsed:.0f} s; see cluster.log")
                    break
                await asyncio.sleep(0.25)
        self.console.print()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return status

    async def _ramp(self, driver: AsyncioDriver, order: list[Machine]) -> None:
        ramp = self.scenario.ramp_s
        for i, machine in enumerate(order):
            self.emit({"time": wall_ms(), "kind": "member_start", "role": machine.role, "member": machine.name,
                       "group": machine.group})
            driver.start(machine)
            if ramp and len(order) > 1:
                await asyncio.sleep(ramp / len(order))

    async def _churn(self, driver: AsyncioDriver, population: Population, group: str, spec: GroupSpec,
                     rng: random.Random) -> None:
        await asyncio.sleep(self.scenario.ramp_s + spec.churn_every_s)
        while True:
            members = population.members_of(group)
            victim = rng.choice(members)
            self.emit({"time": wall_ms(), "kind": "member_stop", "role": victim.role, "member": victim.name, "group": group})
            asyncio.create_task(driver.stop(victim))
            fresh = population.new_member(group)
            members[members.index(victim)] = fresh
            self.emit({"time": wall_ms(), "kind": "member_start", "role": fresh.role, "member": fresh.name, "group": group})
            driver.start(fresh)
            await asyncio.sleep(spec.churn_every_s)

    async def _fault(self, injector: FaultInjector, fault_id: int, load_started: float) -> None:
        spec = self.scenario.faults[fault_id]
        await asyncio.sleep(max(0.0, load_started + spec.at_s - time.monotonic()))
        try:
            injected = await injector.resolve(fault_id, spec, self.cluster)
        except Exception as exc:  # the run goes on; what could not be done is said
            self.notes.append(f"fault {fault_id} ({spec.action}) not injected: {exc}")
            self.stats.fault_lines.append(f"#{fault_id} {spec.action}: not injected ({exc})")
            return
        self.faults.append(injected)
        # A lost node's actors may still answer until the controller moves their partitions: no
        # success counts as a recovery before that (faults.py sets the end).
        kind = KINDS[spec.action]
        since = float("inf") if kind.recovery_after_end else injected.started_ms
        recorded = self.leadership is not None and self.leadership.available
        self.recovery.watch(fault_id, injected.started_ms, since, injected.groups, injected.partitions,
                            injected.detail.get("share_partitions", []), injected.brokers,
                            injected.waits_for if recorded else None)
        self.stats.fault_lines.append(f"#{fault_id} {spec.action} {injected.target}")
        self._restarting = kind.target == "cluster"
        try:
            await injector.inject(injected, self.cluster)
        except Exception as exc:
            self.notes.append(f"fault {fault_id} ({spec.action} {injected.target}) failed: {exc}")
            self.stats.fault_lines.append(f"#{fault_id} {spec.action} {injected.target}: failed ({exc})")
            self._restarting = False
            return
        finally:
            self.emit(injected.row())
        self._restarting = False
        if injected.ended_ms is not None:
            self.recovery.count_from(fault_id, injected.ended_ms)
            self.emit({"time": injected.ended_ms, "kind": "fault_end", "role": "runner", "fault_id": fault_id,
                       "target": injected.target})

    # -- drain ----------------------------------------------------------------------------------------

    async def _drain(self, driver: AsyncioDriver, population: Population, monitor: Monitor) -> None:
        self._phase("drain")
        timeout = self.scenario.checks.drain_timeout_s
        deadline = time.monotonic() + timeout
        with self.console.status("drain: producers flush, then every group reads to the end…") as status:
            await asyncio.gather(*(driver.stop(p, timeout_s=timeout / 2) for p in population.producers))
            partitions = self.scenario.partitions()
            ends = None
            while ends is None and time.monotonic() < deadline:
                ends = await monitor.end_offsets(partitions)
                if ends is None:
                    await asyncio.sleep(0.5)
            if ends is None:
                self.notes.append("the end offsets could not be read: no group's progress is judged")
                return
            now = wall_ms()
            for (t, p), offset in sorted(ends.items()):
                self.emit({"time": now, "kind": "end_offset", "role": "runner", "topic": t, "partition": p, "offset": offset})
            pending = {("classic", g): s.topics for g, s in self.scenario.classic_groups().items()}
            pending.update({("consumer", g): s.topics for g, s in self.scenario.consumer_groups().items()})
            pending.update({("share", g): s.topics for g, s in self.scenario.share_group_specs().items()})
            progress: dict[tuple[str, str], dict[tuple[str, int], int]] = {}
            while pending and time.monotonic() < deadline:
                for (role, group), topics in list(pending.items()):
                    wanted = {t: partitions[t] for t in topics}
                    seen = await (monitor.share_start_offsets(group, wanted) if role == "share" else monitor.committed(group, wanted))
                    if seen is None:
                        continue
                    progress[(role, group)] = seen
                    if all(seen.get((t, p), -1) >= ends[(t, p)] for t in topics for p in range(partitions[t])):
                        self._drained(role, group, topics, seen, ends, "complete")
                        del pending[(role, group)]
                status.update(f"drain: {len(pending)} group(s) still reading to the end "
                              f"({max(0.0, deadline - time.monotonic()):.0f} s left)…")
                if pending:
                    await asyncio.sleep(0.5)
            for (role, group), topics in pending.items():
                self._drained(role, group, topics, progress.get((role, group), {}), ends, "timeout")
                self.notes.append(f"{role} group {group} did not read to the end within {timeout:.0f} s")

    def _drained(self, role: str, group: str, topics: list[str], seen: dict, ends: dict, state: str) -> None:
        now = wall_ms()
        for t in topics:
            for p in range(self.scenario.partitions()[t]):
                self.emit({"time": now, "kind": "drained", "role": role, "group": group, "topic": t, "partition": p,
                           "offset": seen.get((t, p), -1), "state": state})

    # -- end ------------------------------------------------------------------------------------------

    async def _finish_cluster(self, topics: list[dict[str, Any]]) -> None:
        if self.cluster is None:
            if self.external_bootstrap is not None:
                self.notes.append("the cluster was not started by the experiment: its records are not decoded")
            return
        with self.console.status("stopping the cluster and decoding its coordinator records…"):
            await asyncio.to_thread(self.cluster.stop)
            from loadtest.experiment.records import decode_run_records

            names = {t["topic_id"]: t["name"] for t in topics}
            try:
                await asyncio.to_thread(decode_run_records, self.run_dir, self.cluster.coordinator_data_dir, names)
            except Exception as exc:  # the event log stands on its own; say what is missing
                self.notes.append(f"coordinator records not decoded: {exc}")
