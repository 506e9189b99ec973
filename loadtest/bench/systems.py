"""The systems a benchmark runs its workload against: raygroups, and its peers.

A peer is what the ratio divides by: `responder` (loadtest.responder, a do-nothing Kafka responder in
Python: the limit of the client and protocol code), `tansu` (a real broker in Rust, memory storage,
from the bench extra) or `mock` (librdkafka's mock cluster, for the one figure that only needs groups).
Every system starts fresh for each run, so runs can alternate without one warming the next.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ContextManager

from rich.console import Console

console = Console()

PEERS = ("responder", "tansu")
NO_INITIAL_DELAY = {"group.initial.rebalance.delay.ms": 0}


@contextlib.contextmanager
def responder(partitions: int = 10, group_size: int = 0) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadtest.responder", "--port", "0", "--partitions", str(partitions),
         "--group-size", str(group_size)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError("responder did not start")
        yield line.split()[1]
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def raygroups(**settings: object) -> Iterator[str]:
    with raygroups_cluster(**settings) as cluster:
        yield cluster.bootstrap


@contextlib.contextmanager
def raygroups_cluster(**settings: object) -> Iterator[Any]:
    from cluster.config import Config
    from cluster.launcher import start_cluster

    with tempfile.TemporaryDirectory(prefix="raygroups-bench-") as data:
        with console.status("starting raygroups…"):
            cluster = start_cluster(Config(dict(settings)), Path(data), port=0)
        try:
            yield cluster
        finally:
            with console.status("stopping raygroups…"):
                cluster.stop()


@contextlib.contextmanager
def mock() -> Iterator[str]:
    """librdkafka's mock cluster, held by a producer in this process; other clients (other processes
    too) reach it at the address its metadata gives. It creates topics on first use, 4 partitions."""
    from confluent_kafka import Producer

    holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    brokers = holder.list_topics(timeout=10).brokers.values()
    try:
        yield ",".join(f"{b.host}:{b.port}" for b in brokers)
    finally:
        del holder


def tansu() -> ContextManager[str]:
    from loadtest.peers.tansu import tansu as start

    return start()


def starter(system: str, partitions: int = 10, **settings: object) -> Callable[[], ContextManager[str]]:
    """How to start `system` (raygroups with `settings`; a peer's own defaults)."""
    return {
        "raygroups": lambda: raygroups(**settings),
        "responder": lambda: responder(partitions),
        "tansu": tansu,
        "mock": mock,
    }[system]


def peers(option: str) -> list[str]:
    """The --peer option: one peer, `both`, or a comma-separated list."""
    chosen = list(PEERS) if option == "both" else option.split(",")
    unknown = [p for p in chosen if p not in (*PEERS, "mock")]
    if unknown:
        raise SystemExit(f"unknown peer {unknown}: choose from responder, tansu, mock, both")
    if "tansu" in chosen:
        from loadtest.peers.tansu import binary

        binary()  # one clear error now, not after raygroups has run
    return chosen
