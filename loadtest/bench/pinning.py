"""Cores for the system under test and for the load client, and the CPU each spends (SPEC.md §9:
each system runs pinned to the same cores, the load client on others).

Pinning is what `taskset -a -p CPUS PID` does, per thread, with `os.sched_setaffinity`: Linux only,
and only with two cores or more ("where available"; elsewhere nothing is pinned and the figures say
so). The cluster a benchmark starts is this process's descendants (Ray's gcs_server and raylet,
which start every actor's worker process; a worker started later inherits the raylet's cores), so
after it is up every descendant but the client processes goes to the server's cores, and this
process and the client processes to the client's. CPU is read from /proc/PID/stat (user + system),
summed over a set of processes between two instants.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Cores:
    server: frozenset[int]
    client: frozenset[int]

    def describe(self) -> str:
        return f"server on CPU {_cpus(self.server)}, client on CPU {_cpus(self.client)}"


def _cpus(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def split(server: str | None = None, client: str | None = None) -> Cores | None:
    """The cores to pin to, or None where pinning is not available: given as lists ("0", "1,2"),
    else the first half of this process's cores (at least one) for the server, the rest for the client."""
    if not hasattr(os, "sched_setaffinity") or not Path("/proc/self/task").is_dir():
        return None
    mine = sorted(os.sched_getaffinity(0))
    if server is None and client is None and len(mine) < 2:
        return None
    half = max(1, len(mine) // 2)
    chosen_server = _parse(server) if server else frozenset(mine[:half])
    chosen_client = _parse(client) if client else frozenset(mine[half:]) or frozenset(mine)
    return Cores(chosen_server, chosen_client)


def _parse(text: str) -> frozenset[int]:
    return frozenset(int(part) for part in text.split(",") if part.strip())


def pin(pid: int, cpus: frozenset[int]) -> bool:
    """Every thread of `pid` to `cpus` (taskset -a -p); False if the process is gone."""
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return False
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            pass
    return True


def children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def descendants(root: int, leave_out: Iterable[int] = ()) -> set[int]:
    """Every process under `root`, without the subtrees of `leave_out`."""
    tree, found, todo, skip = children(), set(), [root], set(leave_out)
    while todo:
        for pid in tree.get(todo.pop(), []):
            if pid not in skip:
                found.add(pid)
                todo.append(pid)
    return found


def cpu_seconds(pids: Iterable[int]) -> dict[int, float]:
    """User + system CPU seconds of each process still alive."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)
    return out


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two cpu_seconds() readings (a process that started in between counts whole)."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())
