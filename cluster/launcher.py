"""Start and stop a raygroups cluster from a driver process (`raygroups up`, the demo, benchmarks)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.clients.controller import CONTROLLER_NAME, ControllerClient
from cluster.config import Config

__all__ = ["CONTROLLER_NAME", "DASHBOARD_EXTRA", "RayJoinError", "RunningCluster", "start_cluster", "start_ray"]

DASHBOARD_EXTRA = "raygroups[dashboard]"


@dataclass
class RunningCluster:
    addresses: list[str]
    client: ControllerClient
    namespace: str
    owns_ray: bool
    metrics_url: str | None = None  # http://HOST:PORT/metrics, with raygroups.metrics.port >= 0
    dashboard_url: str | None = None  # Ray's dashboard, with raygroups.dashboard
    metrics_endpoint: Any = field(default=None, repr=False)
    operator_addresses: list[str] = field(default_factory=list)  # each gateway's operator listener
    joined: str | None = None  # the Ray cluster joined and how it was found, for --address auto

    @property
    def controller(self) -> Any:
        """The controller's Ray handle, for code that routes through it (benchmarks)."""
        return self.client.handle

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    def stop(self) -> None:
        import ray

        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()
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


class RayJoinError(Exception):
    """Why the Ray cluster named by --address cannot be used, in one line."""


def check_dashboard_installed() -> None:
    """Ray's dashboard needs ray[default]'s packages, which raygroups does not install by default."""
    from ray._private.utils import get_dashboard_dependency_error

    missing = get_dashboard_dependency_error()
    if missing is not None:
        raise RayJoinError(
            f"--dashboard needs Ray's dashboard packages ({missing.name or missing}): "
            f"pip install '{DASHBOARD_EXTRA}' (ray[default] of the same Ray version)"
        )


# Actor answers up to this size travel inline in the call's reply instead of through the object
# store: a Fetch or ShareFetch answer (about 110-350 KB under load) above Ray's 100 KB default paid
# a put and a get, 2.8 ms against 1.5 ms for a 300 KB answer here. GCS hands it to every worker,
# actors included.
RAY_SYSTEM_CONFIG = {"max_direct_call_object_size": 1024 * 1024}


def start_ray(namespace: str, address: str | None, dashboard: bool = False, bind_host: str | None = None) -> str | None:
    """Join the Ray cluster at `address`, or start one inside this process; returns the Ray
    dashboard's URL when `dashboard` asks for it and the cluster has one.

    Without an address, `ray.init()` joins whatever cluster a `ray start` on this machine last
    recorded, and hangs when that cluster is gone; "local" always starts a fresh one. "auto" is
    the cluster `ray start` recorded (`join_address`). An address is probed first, since
    `ray.init` waits a long while for a cluster that does not answer. A Ray started here for
    gateways bound to a loopback `bind_host` runs on loopback too (`_loopback_ray`).
    """
    import ray

    address, _ = join_address(address)
    if dashboard and not address:  # a cluster joined has its own dashboard, or none
        check_dashboard_installed()
    if address:
        check_reachable(address)
    raise_open_files_limit()  # before Ray starts: its processes inherit the limit
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Only a Ray started here takes our system config; a cluster joined keeps its own.
    system_config = {} if address else {"_system_config": RAY_SYSTEM_CONFIG}
    from cluster.admin_client import is_loopback

    on_loopback = not address and bind_host is not None and is_loopback(bind_host)
    try:
        with _loopback_ray() if on_loopback else contextlib.nullcontext():
            context = ray.init(
                address=address or "local",
                namespace=namespace,
                include_dashboard=dashboard,
                dashboard_host="127.0.0.1",  # Ray's default, whatever --host is: the dashboard can run jobs
                log_to_driver=False,
                logging_level=logging.WARNING,
                **system_config,
            )
    except (RuntimeError, ConnectionError) as exc:
        raise RayJoinError(version_mismatch(address, str(exc)) or f"could not join the Ray cluster at {address}: {_last_line(exc)}") from None
    url = getattr(context, "dashboard_url", None) if dashboard else None
    return (url if "://" in url else f"http://{url}") if url else None


LOOPBACK_RAY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def _loopback_ray() -> Iterator[None]:
    """While Ray starts: its node address is 127.0.0.1, so that its servers (GCS, raylet, every
    worker's, the agents') listen on loopback only, as the gateways do.

    Ray binds its servers to its node address when that is loopback, and to every interface
    otherwise; on Linux the node address is the routable one, even for
    ray.init(_node_ip_address="127.0.0.1") (services.resolve_ip_for_localhost), unless Ray's own
    switch for a one-machine Ray, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, is off. Ray reads it when
    imported: this process sees the flag it derived (ray_constants.ENABLE_RAY_CLUSTER), and the
    processes Ray starts meanwhile see the variable. Both are put back once Ray runs, so that
    nothing else in this process (a later Ray) is changed."""
    import ray._private.ray_constants as ray_constants

    previous = (os.environ.get(LOOPBACK_RAY_ENV), ray_constants.ENABLE_RAY_CLUSTER)
    os.environ[LOOPBACK_RAY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if previous[0] is None:
            os.environ.pop(LOOPBACK_RAY_ENV, None)
        else:
            os.environ[LOOPBACK_RAY_ENV] = previous[0]
        ray_constants.ENABLE_RAY_CLUSTER = previous[1]


PROBE_SECONDS = 5.0
RAY_CLIENT_PORT = 10001


def join_address(address: str | None) -> tuple[str | None, str | None]:
    """The Ray address to join for --address, and for "auto" where it came from.

    "auto" is RAY_ADDRESS when set, else the cluster `ray start` recorded on this machine (Ray
    writes its GCS address to ray_current_cluster in its temp directory, and `ray stop` removes
    it), and never anything else. Ray's own "auto" falls back to any GCS process it finds running
    here (services.get_ray_address_from_environment, "legacy"), which joined another program's
    embedded Ray: a `ray.init()` inside a process starts a GCS but records nothing. So the
    address is resolved here and Ray is given the address itself.
    """
    if address != "auto":
        return address, None
    from ray._common.utils import get_ray_address_file

    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    record = get_ray_address_file(None)
    try:
        recorded = Path(record).read_text().strip()
    except OSError:
        recorded = ""
    if not recorded:
        raise RayJoinError(
            f"--address auto: no Ray cluster started by `ray start` is recorded on this machine ({record}); "
            "start one with `ray start --head`, or give its address (a Ray that another program started "
            "inside itself is never joined)"
        )
    return recorded, f"the Ray cluster `ray start` recorded in {record}"


def probe_target(address: str) -> tuple[str, int]:
    """The host and port that answer for `address` when a cluster runs there."""
    address = join_address(address)[0] or ""
    default_port = None
    if address.startswith("ray://"):
        address, default_port = address[len("ray://"):], RAY_CLIENT_PORT
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, str(default_port or "")
    if not port.isdigit() or not host:
        raise RayJoinError(f"--address {address!r}: expected auto, ray://host[:port] or host:port")
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = PROBE_SECONDS) -> None:
    import socket

    host, port = probe_target(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        reason = "no answer in time" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise RayJoinError(f"no Ray cluster answers at {host}:{port} ({reason}); start one with `ray start --head` or check --address") from None


def version_mismatch(address: str | None, message: str) -> str | None:
    """Ray's multi-line version mismatch as one line naming both sides' versions."""
    import re
    import sys

    import ray

    if "Version mismatch" not in message:
        return None
    found = re.search(r"Ray:\s*(\S+)\s*Python:\s*(\S+)", message)
    theirs = f"Ray {found.group(1)} on Python {found.group(2)}" if found else "another Ray or Python version"
    ours = f"Ray {ray.__version__} on Python {'.'.join(map(str, sys.version_info[:3]))}"
    return f"the Ray cluster at {address} runs {theirs}; this raygroups needs {ours} (install the same on every node)"


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


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
    dashboard_url = None
    address, found_in = join_address(address) if owns_ray else (address, None)
    if owns_ray:
        dashboard_url = start_ray(namespace, address, dashboard=bool(config["raygroups.dashboard"]), bind_host=host)
    from cluster.control.controller import ControllerActor

    controller = ControllerClient.spawn(ControllerActor, config, Path(data_dir).resolve(), host, port, namespace)
    endpoint = None
    try:
        addresses = controller.start_blocking()
        endpoint = start_metrics(config, controller, host)
    except BaseException:
        controller.kill()
        if owns_ray:
            ray.shutdown()
        raise
    return RunningCluster(
        addresses, controller, namespace, owns_ray,
        metrics_url=endpoint.url if endpoint else None, dashboard_url=dashboard_url, metrics_endpoint=endpoint,
        operator_addresses=operator_addresses(controller),
        joined=f"joined the Ray cluster at {address}, {found_in}" if found_in else None,
    )


def operator_addresses(controller: Any, timeout: float = 10) -> list[str]:
    """Each gateway's operator listener, in broker order: where `raygroups status/kill/...` are
    served without credentials (its default port is a free one, so the operator learns it here)."""
    try:
        actors = controller.actors_info_blocking(timeout)
    except Exception as exc:  # the cluster serves anyway; `raygroups actors` shows them later
        logging.getLogger(__name__).warning("operator listeners unknown: %s", exc)
        return []
    gateways = sorted((a for a in actors if a.get("kind") == "gateway"), key=lambda a: _broker_id(a["name"]))
    return [a["operator_address"] for a in gateways if a.get("operator_address")]


def _broker_id(gateway_name: str) -> int:
    suffix = gateway_name.rpartition("-")[2]  # gateway-<broker id>
    return int(suffix) if suffix.isdigit() else -1


def start_metrics(config: Config, controller: ControllerClient, host: str) -> Any:
    """The Prometheus endpoint (cluster/metrics/endpoint.py) on raygroups.metrics.port; -1: none."""
    port = config["raygroups.metrics.port"]
    if port is None or port < 0:
        return None
    from cluster.metrics.endpoint import MetricsEndpoint

    try:
        return MetricsEndpoint.start(controller.metrics_blocking, host, port)
    except OSError as exc:
        raise RayJoinError(f"the metrics endpoint cannot listen on {host}:{port}: {exc.strerror or exc}") from None
