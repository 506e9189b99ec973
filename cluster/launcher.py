"""Start and stop a raygroups cluster from a driver process (`raygroups up`, the demo, benchmarks)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.clients.controller import CONTROLLER_NAME, ControllerClient
from cluster.config import Config

__all__ = ["CONTROLLER_NAME", "RunningCluster", "start_cluster", "start_ray"]


@dataclass
class RunningCluster:
    addresses: list[str]
    client: ControllerClient
    namespace: str
    owns_ray: bool

    @property
    def controller(self) -> Any:
        """The controller's Ray handle, for code that routes through it (benchmarks)."""
        return self.client.handle

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    def stop(self) -> None:
        import ray

        try:
            self.client.shutdown_blocking(timeout=60)
        except Exception as exc:  # shutting down anyway; the logs are recoverable by design
            logging.getLogger(__name__).warning("controller shutdown: %s", exc)
        try:
            self.client.kill()
        except Exception:
            pass
        if self.owns_ray:
            ray.shutdown()


def raise_open_files_limit() -> None:
    """Every actor is a process with sockets to the others and to clients: lift the soft limit
    on open files to the hard one, as Ray advises (a 1024 default runs out under load)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            pass  # keep what we have; Ray warns if it is too low


def start_ray(namespace: str, address: str | None) -> None:
    """Join the Ray cluster at `address`, or start one inside this process.

    Without an address, `ray.init()` joins whatever cluster a `ray start` on this machine last
    recorded, and hangs when that cluster is gone; "local" always starts a fresh one.
    """
    import ray

    raise_open_files_limit()  # before Ray starts: its processes inherit the limit
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        address=address or "local",
        namespace=namespace,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )


def start_cluster(
    config: Config,
    data_dir: Path,
    host: str = "127.0.0.1",
    port: int = 9092,
    address: str | None = None,
) -> RunningCluster:
    import ray

    namespace = config["raygroups.cluster.id"]
    if not config["raygroups.scram.credentials.file"]:
        from cluster.gateway.auth.credentials import path_in

        config = config.with_overrides({"raygroups.scram.credentials.file": str(path_in(Path(data_dir).resolve()))})
    owns_ray = not ray.is_initialized()
    if owns_ray:
        start_ray(namespace, address)
    from cluster.actors.controller import ControllerActor

    controller = ControllerClient.spawn(ControllerActor, config, Path(data_dir).resolve(), host, port, namespace)
    try:
        addresses = controller.start_blocking()
    except BaseException:
        controller.kill()
        if owns_ray:
            ray.shutdown()
        raise
    return RunningCluster(addresses, controller, namespace, owns_ray)
