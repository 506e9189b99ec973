"""Light members run in one client process or spread over several, behind one interface (a fleet).

One Python process drives about 10,000 requests/s of light members before the client, not the
broker, is the limit. A `ProcessFleet` runs the members in N spawned processes, each its own event
loop and Crowd, steered over a pipe: start these members, are they Stable, how many answers of an
API came in this window, the times of these observations. Rates are summed from one shared
wall-clock window; timestamps are wall-clock milliseconds, comparable across the processes of one
machine. A `LocalFleet` is the same interface over a Crowd in this process (`--processes 1`).
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import time
from dataclasses import dataclass, field
from typing import Any

from cluster.runtime.collector import full_collections_paused
from loadtest.drivers.crowd import Crowd
from loadtest.members.classic import ClassicConfig, ClassicMember, ClassicState
from loadtest.members.consumer import ConsumerConfig, ConsumerMember, ConsumerState
from loadtest.members.machine import Millis, parse_bootstrap

TOPIC = "bench-groups"
Member = ClassicMember | ConsumerMember


@dataclass(frozen=True)
class Spec:
    """A light member to run, classic or of KIP-848's consumer protocol (`protocol`, Kafka's
    group.protocol): `process` picks which client process holds it."""

    name: str
    group: str
    process: int = 0
    pool: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    protocol: str = "classic"
    topic: str = TOPIC
    timed: bool = False  # note since when it has been settled as it is (_SettleClock)

    def build(self, bootstrap: str) -> Member:
        brokers = parse_bootstrap(bootstrap)
        if self.protocol == "consumer":
            config = ConsumerConfig(self.group, [self.topic], **{"fetch": False, **self.config})
            return (TimedConsumer if self.timed else ConsumerMember)(self.name, brokers, config, pool=self.pool)
        settings = {"session_timeout_ms": 30_000, "fetch": False, **self.config}
        config = ClassicConfig(self.group, [self.topic], **settings)
        return (TimedClassic if self.timed else ClassicMember)(self.name, brokers, config, pool=self.pool)


class _SettleClock:
    """Since when the member has been settled (_settled) as it is now, in this generation (a
    consumer member's: its member epoch) with these partitions: noted after every answer and
    timer, so a member whose assignment does not change, which reaches a new epoch with no
    observation row of its own, is timed too; None while it is not settled. A consumer member
    may be settled at the new epoch before it is given a partition another member still has to
    revoke (the coordinator holds it back), and settle again once it takes it: what counts is the
    last time, once the whole group is done."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settled_since: Millis | None = None
        self._settled_as: tuple[int, frozenset[tuple[str, int]]] | None = None

    def receive(self, request_id: int, response: Any, now: Millis, size: int | None = None) -> None:
        super().receive(request_id, response, now, size)  # type: ignore[misc]
        self._note(now)

    def tick(self, now: Millis) -> None:
        super().tick(now)  # type: ignore[misc]
        self._note(now)

    def _note(self, now: Millis) -> None:
        member: Any = self
        owned = frozenset((t, p) for t, ps in member.assignment.items() for p in ps)
        now_as = (member.generation, owned) if _settled(member) else None
        if now_as != self._settled_as:
            self._settled_as = now_as
            self.settled_since = None if now_as is None else now


class TimedClassic(_SettleClock, ClassicMember):
    pass


class TimedConsumer(_SettleClock, ConsumerMember):
    pass


@dataclass(frozen=True)
class Status:
    members: int
    stable: int  # Stable with a position for every partition assigned
    min_generation: int
    max_generation: int
    owned: int = 0  # partitions the members hold, summed

    @staticmethod
    def merge(parts: list["Status"]) -> "Status":
        present = [p for p in parts if p.members]
        return Status(sum(p.members for p in parts), sum(p.stable for p in parts),
                      min((p.min_generation for p in present), default=-1), max((p.max_generation for p in present), default=-1),
                      sum(p.owned for p in parts))


def _settled(m: Member) -> bool:
    """Stable with a position for every partition it owns, and nothing being revoked (a cooperative
    classic member is Stable as its SyncGroup answers, then commits what moves, drops it and rejoins;
    a member asked to rejoin after its SyncGroup will rejoin)."""
    stable = ClassicState.STABLE if isinstance(m, ClassicMember) else ConsumerState.STABLE
    return (m.state is stable and len(m.positions) == sum(len(ps) for ps in m.assignment.values())
            and not m._revoking and not getattr(m, "_rejoin_after_sync", False))


class Members:
    """The members of one process and the questions a fleet asks about them."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.crowd = Crowd()
        self.by_name: dict[str, Member] = {}
        self._quiet: Any = None

    def start(self, specs: list[Spec]) -> None:
        members = [s.build(self.bootstrap) for s in specs]
        self.by_name.update((m.name, m) for m in members)
        self.crowd.start(members)

    def status(self) -> Status:
        members = list(self.by_name.values())
        generations = [m.generation for m in members]
        return Status(len(members), sum(_settled(m) for m in members), min(generations, default=-1),
                      max(generations, default=-1), sum(len(ps) for m in members for ps in m.assignment.values()))

    def count(self, api: str, since_ms: float, until_ms: float) -> int:
        return sum(1 for r in self.crowd.where("response", since_ms, api=api, error="NONE") if r["time"] <= until_ms)

    def times(self, kind: str, since_ms: float, equal: dict[str, Any]) -> list[float]:
        return [r["time"] for r in self.crowd.where(kind, since_ms, **equal)]

    def latencies(self, api: str, since_ms: float, until_ms: float) -> list[float]:
        """Round trips (ms, request sent to answer read) of `api` sent in the window and answered
        without error. By when they were sent: a request sent before the window and held up by
        something before it (the client's own collection as it went quiet) is not the window's."""
        return [r["latency_ms"] for r in self.crowd.where("response", since_ms, api=api, error="NONE")
                if since_ms <= r["request_time"] <= until_ms]

    def quiet(self, on: bool) -> None:
        """The collector's full passes off while a latency window is measured (on), back after.
        The client keeps every observation, so its heap grows, and a full pass over it stopped
        every member for 180-250 ms: measured as the system's p99 (a client stall, not the
        system's). What is held when it begins is frozen out of the passes (gc.freeze)."""
        if on and self._quiet is None:
            self._quiet = full_collections_paused()
            gc.collect()
            gc.freeze()
            self._quiet.__enter__()
        elif not on and self._quiet is not None:
            self._quiet.__exit__(None, None, None)
            self._quiet = None
            gc.unfreeze()

    def settled_since(self) -> list[float | None]:
        """Since when each timed member has been settled as it is now (None: it is not)."""
        return [getattr(m, "settled_since", None) for m in self.by_name.values()]

    @staticmethod
    def cpu() -> float:
        """CPU seconds of the event loop's thread: the members' work, not Ray's threads in a bench process."""
        return time.thread_time()

    async def stop(self, names: list[str] | None) -> None:
        if names is None:
            await self.crowd.stop()
            self.by_name.clear()
            return
        await self.crowd.stop([self.by_name.pop(n) for n in names if n in self.by_name])


class LocalFleet:
    """Every member in this process."""

    processes = 1

    def __init__(self, bootstrap: str) -> None:
        self.here = Members(bootstrap)
        self.crowd = self.here.crowd

    async def start(self, specs: list[Spec]) -> None:
        self.here.start(specs)

    async def status(self) -> Status:
        return self.here.status()

    async def count(self, api: str, since_ms: float, until_ms: float) -> int:
        return self.here.count(api, since_ms, until_ms)

    async def times(self, kind: str, since_ms: float, **equal: Any) -> list[float]:
        return self.here.times(kind, since_ms, equal)

    async def latencies(self, api: str, since_ms: float, until_ms: float) -> list[float]:
        return self.here.latencies(api, since_ms, until_ms)

    async def quiet(self, on: bool) -> None:
        self.here.quiet(on)

    async def settled_since(self) -> list[float | None]:
        return self.here.settled_since()

    async def cpu(self) -> float:
        return self.here.cpu()

    @property
    def pids(self) -> list[int]:
        return []  # the members run in this process

    async def stop(self, names: list[str] | None = None) -> None:
        await self.here.stop(names)

    async def close(self) -> None:
        await self.here.stop(None)


class ProcessFleet:
    """Members in `processes` spawned client processes; a Spec's `process` (mod N) places it."""

    def __init__(self, bootstrap: str, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.processes = processes
        self.crowd = Crowd()  # this process's own requests (CreateTopics), no members
        self._pipes = []
        self._children = []
        for _ in range(processes):
            mine, theirs = context.Pipe()
            child = context.Process(target=_child, args=(theirs, bootstrap), daemon=True)
            child.start()
            theirs.close()
            self._pipes.append(mine)
            self._children.append(child)
        self._lock = [asyncio.Lock() for _ in range(processes)]

    async def _ask(self, i: int, *command: Any) -> Any:
        async with self._lock[i]:
            self._pipes[i].send(command)
            ok, value = await asyncio.to_thread(self._pipes[i].recv)
        if not ok:
            raise RuntimeError(f"client process {i}: {value}")
        return value

    async def _all(self, *command: Any) -> list[Any]:
        return list(await asyncio.gather(*(self._ask(i, *command) for i in range(self.processes))))

    async def start(self, specs: list[Spec]) -> None:
        parts: list[list[Spec]] = [[] for _ in range(self.processes)]
        for spec in specs:
            parts[spec.process % self.processes].append(spec)
        await asyncio.gather(*(self._ask(i, "start", part) for i, part in enumerate(parts) if part))

    async def status(self) -> Status:
        return Status.merge(await self._all("status"))

    async def count(self, api: str, since_ms: float, until_ms: float) -> int:
        return sum(await self._all("count", api, since_ms, until_ms))

    async def times(self, kind: str, since_ms: float, **equal: Any) -> list[float]:
        return [t for part in await self._all("times", kind, since_ms, equal) for t in part]

    async def latencies(self, api: str, since_ms: float, until_ms: float) -> list[float]:
        return [t for part in await self._all("latencies", api, since_ms, until_ms) for t in part]

    async def quiet(self, on: bool) -> None:
        await self._all("quiet", on)

    async def settled_since(self) -> list[float | None]:
        return [t for part in await self._all("settled_since") for t in part]

    @property
    def pids(self) -> list[int]:
        return [c.pid for c in self._children if c.pid is not None]

    async def cpu(self) -> float:
        """CPU seconds of the client processes' event loops, summed."""
        return sum(await self._all("cpu"))

    async def stop(self, names: list[str] | None = None) -> None:
        await self._all("stop", names)

    async def close(self) -> None:
        try:
            await self._all("close")
        finally:
            for pipe in self._pipes:
                pipe.close()
            for child in self._children:
                child.join(10)
                if child.is_alive():
                    child.kill()
            await self.crowd.driver.close()


def fleet(bootstrap: str, processes: int) -> LocalFleet | ProcessFleet:
    return LocalFleet(bootstrap) if processes <= 1 else ProcessFleet(bootstrap, processes)


async def until_settled(f: LocalFleet | ProcessFleet, timeout_s: float, one_group: bool = False,
                        newer_than: int = -1, poll_s: float = 0.02, owned: int | None = None) -> Status:
    """Wait until every member is Stable with a position for each partition it owns; members of
    `one_group` also in one generation, newer than `newer_than`; with `owned`, holding that many
    partitions together."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = await f.status()
        if (s.stable == s.members and (not one_group or s.max_generation == s.min_generation > newer_than)
                and (owned is None or s.owned == owned)):
            return s
        if time.monotonic() > deadline:
            raise RuntimeError(f"the members did not all reach Stable ({s.stable} of {s.members})")
        await asyncio.sleep(poll_s)


def _child(pipe: Any, bootstrap: str) -> None:
    asyncio.run(_serve(pipe, bootstrap))  # the loop `--processes 1` runs on: the same client per process


async def _serve(pipe: Any, bootstrap: str) -> None:
    """One client process: answer the fleet's commands while the members run on this loop."""
    here = Members(bootstrap)
    inbox: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()
    loop.add_reader(pipe.fileno(), lambda: inbox.put_nowait(pipe.recv()))
    while True:
        command, *args = await inbox.get()
        try:
            if command == "start":
                result: Any = here.start(args[0])
            elif command == "status":
                result = here.status()
            elif command == "count":
                result = here.count(*args)
            elif command == "times":
                result = here.times(*args)
            elif command == "latencies":
                result = here.latencies(*args)
            elif command == "quiet":
                result = here.quiet(*args)
            elif command == "settled_since":
                result = here.settled_since()
            elif command == "cpu":
                result = here.cpu()
            elif command in ("stop", "close"):
                result = await here.stop(args[0] if args else None)
            else:
                raise ValueError(f"unknown command {command!r}")
            pipe.send((True, result))
        except Exception as exc:  # noqa: BLE001 - the fleet raises it in the parent
            pipe.send((False, repr(exc)))
        if command == "close":
            loop.remove_reader(pipe.fileno())
            return
