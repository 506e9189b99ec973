"""The cluster's leadership changes during a run, as the controller made them: `leadership.parquet`.

The runner pages through the operator API's `leadership` op (cluster/control/leadership_changes.py) about
twice a second and once more before the cluster stops. Each change is a fact, not a guess from the
fault schedule: a partition, its new leader epoch and actor, the old actor, the cause (failover,
node-loss, balance, operator-move, ...) and three instants (began, released, loaded; what they
mean is in cluster/control/leadership_changes.py and docs/experiments.md). The checker judges same-count
share redeliveries and coordinator moves by them, and the recovery watch counts a moved
partition's successes only from the moment its old leader could serve no more.

A controller that restarts (a `restart-cluster` fault) counts its changes from 0 again under a
new incarnation; the recorder notices and starts over from 0 with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.admin_client import AdminError
from loadtest.experiment.rundir import LEADERSHIP

log = logging.getLogger(__name__)

TIME = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("time", TIME),  # began: the controller was about to bump the epoch
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("actor", pa.string()),  # the new leader (null: none, cause `unavailable`)
        ("previous", pa.string()),  # the old leader (null: none)
        ("cause", pa.string()),
        ("released", TIME),  # the old leader serves nothing asked from here on
        ("loaded", TIME),  # the new leader had loaded it (null: that load failed and was retried)
    ]
)
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class Change:
    """One leadership change; times in milliseconds since the epoch, as the event log's rows."""

    began_ms: float
    topic: str
    partition: int
    leader_epoch: int
    actor: str | None
    previous: str | None
    cause: str
    released_ms: float
    loaded_ms: float | None

    @classmethod
    def from_controller(cls, c: dict[str, Any]) -> "Change":
        return cls(c["began"] * 1000, c["topic"], int(c["partition"]), int(c["leader_epoch"]), c["actor"],
                   c["previous"], c["cause"], c["released"] * 1000, None if c["loaded"] is None else c["loaded"] * 1000)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition


class LeadershipRecorder:
    """Pages through the controller's changes; hands each new one to `on_change` as it comes."""

    def __init__(self, call: Callable[..., Any], on_change: Callable[[Change], None], since_ms: float = 0.0) -> None:
        self.call = call  # the operator API (loadtest/experiment/faults.py Admin.call)
        self.on_change = on_change
        self.since_ms = since_ms  # changes that began before the run are not the run's
        self.changes: list[Change] = []
        self.incarnation: str | None = None
        self.next = 0
        self.available = True  # False: the cluster does not record changes (an older raygroups)
        self.dropped = 0

    async def poll(self) -> None:
        try:
            page = await self.call("leadership", timeout=10, since=self.next)
        except AdminError as exc:
            if "unknown admin op" in str(exc):
                self.available = False
            return  # unreachable for now (a gateway killed, the cluster restarting): next time
        if page["incarnation"] != self.incarnation:
            restarted = self.incarnation is not None
            self.incarnation = page["incarnation"]
            if restarted and self.next:
                self.next = 0
                return await self.poll()
        self.dropped += page.get("dropped", 0)
        for raw in page["changes"]:
            change = Change.from_controller(raw)
            if change.began_ms < self.since_ms:
                continue
            self.changes.append(change)
            self.on_change(change)
        self.next = page["next"]

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll()
            try:
                await asyncio.wait_for(stop.wait(), POLL_S)
            except asyncio.TimeoutError:
                pass

    def write(self, run_dir: Path) -> None:
        write_changes(Path(run_dir) / LEADERSHIP, self.changes)


def write_changes(path: Path, changes: list[Change]) -> None:
    def us(ms: float | None) -> int | None:
        return None if ms is None else int(ms * 1000)

    columns = {
        "time": [us(c.began_ms) for c in changes],
        "topic": [c.topic for c in changes],
        "partition": [c.partition for c in changes],
        "leader_epoch": [c.leader_epoch for c in changes],
        "actor": [c.actor for c in changes],
        "previous": [c.previous for c in changes],
        "cause": [c.cause for c in changes],
        "released": [us(c.released_ms) for c in changes],
        "loaded": [us(c.loaded_ms) for c in changes],
    }
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pydict(columns, schema=SCHEMA), tmp)
    tmp.rename(path)
