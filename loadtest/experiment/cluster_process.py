"""The cluster an experiment starts: `raygroups up` as a child process, as a user would run it.

It runs in a process session of its own, so "kill the whole cluster" is SIGKILL to every process
of that session (the driver, its embedded Ray and every actor: nothing is left to shut down
cleanly), and a restart is `raygroups up` again on the same data directory and the same ports,
which clients already know. With several Ray nodes, the nodes are started here
(`ray.cluster_utils.Cluster`, as Ray's own tests do) and `raygroups up --address` joins them, so
one node can be removed mid-run while the head keeps the controller.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loadtest.experiment.scenario import ClusterSpec


class ClusterStartError(RuntimeError):
    pass


class PortTaken(Exception):
    """`raygroups up` found a gateway's port taken (by Ray's own ports, started just before)."""


def free_port_block(count: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """A first port such that `count` consecutive ports are free now."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind((host, 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        if all(_port_free(host, first + i) for i in range(count)):
            return first
    raise ClusterStartError(f"no block of {count} free ports on {host}")


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class RayNodes:
    """Several Ray nodes on this machine: the head (node 0) and workers that can be removed.

    The workers join only once `raygroups up` runs on the head alone (add_workers): Ray places a
    zero-CPU actor on a random node, and the controller (which owns every other actor, so they
    die with it) must be on the head for a worker's loss to be survivable, as on a real cluster
    where `raygroups up` is started before or apart from the workers."""

    def __init__(self, count: int, disks: Path | None = None) -> None:
        from ray.cluster_utils import Cluster

        self.count = count
        self.disks = disks  # per-node storage: node i keeps its logs in disks/node-i
        self.cluster = Cluster(initialize_head=True, connect=False, head_node_args=self._args(0))
        self.nodes = [self.cluster.head_node]
        self.cluster.wait_for_nodes()

    def _args(self, index: int) -> dict[str, Any]:
        args: dict[str, Any] = {"num_cpus": 1}
        if self.disks is not None:
            from cluster.log.data_directory import NODE_DATA_DIR_ENV

            args["env_vars"] = {NODE_DATA_DIR_ENV: str(self.disks / f"node-{index}")}
        return args

    def add_workers(self) -> list[str]:
        """Start the worker nodes (from the main thread); their node ids."""
        while len(self.nodes) < self.count:
            self.nodes.append(self.cluster.add_node(**self._args(len(self.nodes))))
        self.cluster.wait_for_nodes()
        return [n.node_id for n in self.nodes[1:]]

    @property
    def address(self) -> str:
        return self.cluster.address

    def node_id(self, index: int) -> str:
        return self.nodes[index].node_id

    def remove(self, index: int) -> str:
        node = self.nodes[index]
        self.cluster.remove_node(node, allow_graceful=False)
        return node.node_id

    def shutdown(self) -> None:
        self.cluster.shutdown()


class ClusterProcess:
    def __init__(self, run_dir: Path, spec: ClusterSpec, settings: dict[str, Any], host: str = "127.0.0.1") -> None:
        self.run_dir = Path(run_dir)
        self.data_dir = self.run_dir / "data"
        self.spec = spec
        self.settings = settings
        self.host = host
        self.port = free_port_block(self.spec.gateway_count, host)
        self.bootstrap = self._bootstrap()
        self.nodes: RayNodes | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path = self.run_dir / "cluster.log"
        self.starts = 0
        self.ready_once = False  # READY at least once: its addresses are known, a restart keeps them
        self._log = open(self.log_path, "ab")

    def _bootstrap(self) -> str:
        # Per node, only the head's gateway is up when raygroups is (the workers join after).
        count = 1 if self.spec.gateways_per_node else self.spec.gateways
        return ",".join(f"{self.host}:{self.port + i}" for i in range(count))

    def command(self) -> list[str]:
        gateways = "per-node" if self.spec.gateways_per_node else str(self.spec.gateways)
        cmd = [
            sys.executable, "-m", "cluster.cli", "up",
            "--host", self.host, "--port", str(self.port), "--gateways", gateways,
            # The Ray nodes here all see this machine's disk: shared storage is its one directory;
            # per-node storage gives each node a directory of its own (RayNodes).
            "--shared-data-dir" if self.spec.nodes > 1 and self.spec.storage == "shared" else "--data-dir",
            str(self.data_dir),
            "--coordinators", str(self.spec.coordinators),
            "--share-coordinators", str(self.spec.share_coordinators),
            "--partition-leaders", str(self.spec.partition_leaders),
        ]
        for name, value in sorted(self.settings.items()):
            cmd += ["--config", f"{name}={_setting(value)}"]
        if self.nodes is not None:
            cmd += ["--address", self.nodes.address]
        return cmd

    def start_nodes(self) -> None:
        """The Ray nodes, when the cluster has several (from the main thread: Ray sets signal handlers)."""
        if self.spec.nodes > 1 and self.nodes is None:
            self.nodes = RayNodes(self.spec.nodes, self.data_dir if self.spec.storage == "per-node" else None)

    @property
    def coordinator_data_dir(self) -> Path:
        """Where the coordinators' logs are: with per-node storage, the head's directory (they keep
        one copy there until they keep replicas: docs/scale-out.md)."""
        if self.spec.nodes > 1 and self.spec.storage == "per-node":
            return self.data_dir / "node-0"
        return self.data_dir

    def start(self, timeout_s: float = 180.0) -> str:
        """Start `raygroups up` and wait for READY; the gateways' addresses.

        The gateways' ports are chosen before Ray starts, and Ray, starting first, binds ports of
        its own at random: one of them can be a gateway's (seen once in a run of the test suite,
        "address already in use"). Until the cluster has been READY once nobody knows its
        addresses, so a first start that lost its ports so takes another block, up to 3 times;
        a restart keeps its addresses, which its clients know."""
        for attempt in range(3):
            try:
                return self._start(timeout_s)
            except PortTaken:
                if self.ready_once or attempt == 2:
                    raise ClusterStartError(f"raygroups up could not bind its gateways' ports; see {self.log_path}") from None
                self.port = free_port_block(self.spec.gateway_count, self.host)
                self.bootstrap = self._bootstrap()
        raise AssertionError("unreachable")

    def _start(self, timeout_s: float) -> str:
        if self.spec.nodes > 1 and self.nodes is None:
            raise ClusterStartError("start_nodes() first: the Ray nodes come up in the main thread")
        self.starts += 1
        self._log.write(f"\n--- raygroups up (start {self.starts}) ---\n".encode())
        self._log.flush()
        log_from = self._log.tell()
        env = dict(os.environ, RAY_DEDUP_LOGS="0")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=self._log, env=env,
                                     start_new_session=True)
        ready = threading.Event()
        lines: list[str] = []

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                self._log.write(raw)
                self._log.flush()
                line = raw.decode(errors="replace").strip()
                lines.append(line)
                if line.startswith("READY "):
                    self.bootstrap = ready_addresses(line) or self.bootstrap
                    self.ready_once = True
                    ready.set()

        threading.Thread(target=read, daemon=True, name="cluster-stdout").start()
        deadline = time.monotonic() + timeout_s
        while not ready.wait(0.2):
            if self.proc.poll() is not None:
                self._log.flush()
                if b"address already in use" in self.log_path.read_bytes()[log_from:]:
                    raise PortTaken()
                raise ClusterStartError(f"raygroups up exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.kill()
                raise ClusterStartError(f"raygroups up was not READY within {timeout_s:.0f} s; see {self.log_path}")
        return self.bootstrap

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL every process of the cluster's session: a machine losing power, as far as one can."""
        if self.proc is None:
            return
        pids = _session_pids(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop cleanly (SIGTERM: the actors close their logs), or kill it if it does not stop in time."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill()  # whatever is left of the session (Ray's agents linger after their driver)
        if self.nodes is not None:
            self.nodes.shutdown()
            self.nodes = None
        self._log.close()


def ready_addresses(line: str) -> str:
    """The gateways' addresses as `raygroups up` announced them ("READY host:port[,...]"): they are
    where the gateways listen, whatever port arithmetic would guess."""
    _, _, rest = line.partition("READY ")
    return ",".join(a.strip() for a in rest.split(",") if a.strip())


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) == sid:
                pids.append(int(entry))
        except (ProcessLookupError, PermissionError):
            continue
    return pids


def _setting(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
