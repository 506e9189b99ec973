"""The `raygroups` command (PROTOCOL.md §3).

Exit codes: 0 success, 1 a check or experiment found a violation, 2 bad usage or configuration.
Every error a user can cause is one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Optional

import typer

from cluster.admin_client import AdminError, Security, admin_call
from cluster.cli_output import console, err, fail
from cluster.cli_tables import actors_document, actors_table, print_json, print_status, status_document
from cluster.config import SETTINGS, Config, ConfigError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Kafka group coordination (classic and share groups) on Ray actors.",
)

BootstrapOption = typer.Option("127.0.0.1:9092", "--bootstrap", "-b", envvar="RAYGROUPS_BOOTSTRAP",
                               help="a gateway, host:port")
JsonOption = typer.Option(False, "--json", envvar="RAYGROUPS_JSON", help="one JSON document instead of tables")


def _version(value: bool) -> None:
    if not value:
        return
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    typer.echo(f"raygroups {of('raygroups')} (Ray {of('ray')}, Python {platform.python_version()})")
    raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="raygroups', Ray's and Python's versions"),
) -> None:
    """Kafka group coordination (classic and share groups) on Ray actors."""


def _setting_option(option: str, setting: str, text: str | None) -> Any:
    """An option that stands for a setting, held to the setting's range: `--port abc` or
    `--coordinators 0` is one line naming the option, as `--config` names the setting."""
    if text is None:
        return None
    try:
        return SETTINGS[setting].parse(text)
    except ValueError as exc:
        fail(f"{option}: {exc}")


def _int_option(option: str, text: str | None, low: int, high: int) -> int | None:
    from cluster.config_values import Int

    if text is None:
        return None
    kind = Int(low, high)
    try:
        value = kind.convert(text)
        kind.check(value)
    except ValueError as exc:
        fail(f"{option}: {exc}")
    return value


@app.command()
def up(
    host: Optional[str] = typer.Option(None, envvar="RAYGROUPS_HOST", help="address the gateways listen on (0.0.0.0: every interface) [default: 127.0.0.1]"),
    advertised_host: Optional[str] = typer.Option(None, envvar="RAYGROUPS_ADVERTISED_HOST", help="address clients are told to connect to (Kafka's advertised.listeners host); default: --host, or the node's IP when --host is 0.0.0.0"),
    port: Optional[str] = typer.Option(None, envvar="RAYGROUPS_PORT", help="first gateway port, 0..65535 (gateway i listens on port+i; 0 picks free ports) [default: 9092]"),
    gateways: Optional[str] = typer.Option(None, envvar="RAYGROUPS_GATEWAYS", help="gateways (brokers as clients see them): a count, or per-node (one on each Ray node; the default on a multi-node cluster)"),
    address: Optional[str] = typer.Option(None, envvar="RAYGROUPS_ADDRESS", help="join this Ray cluster (auto: the one `ray start` recorded on this machine, or RAY_ADDRESS; never a Ray another program started inside itself), ray://host:port or host:port; without it an embedded Ray starts"),
    data_dir: Optional[Path] = typer.Option(None, envvar="RAYGROUPS_DATA_DIR", help="where partition logs live; reused on restart [default: the first of log.dirs, else raygroups-data]"),
    shared_data_dir: Optional[Path] = typer.Option(None, envvar="RAYGROUPS_SHARED_DATA_DIR", help="the data directory, on storage every Ray node mounts (NFS, a shared volume): the nodes keep one copy there together; without it each node keeps its logs in a directory of its own and partitions are replicated (docs/scale-out.md)"),
    coordinators: Optional[str] = typer.Option(None, envvar="RAYGROUPS_COORDINATORS", help="group coordinator actors (at least 1)"),
    share_coordinators: Optional[str] = typer.Option(None, envvar="RAYGROUPS_SHARE_COORDINATORS", help="share coordinator actors (at least 1)"),
    partition_leaders: Optional[str] = typer.Option(None, envvar="RAYGROUPS_PARTITION_LEADERS", help="partition leader actors (at least 1)"),
    config: list[str] = typer.Option([], "--config", "-c", envvar="RAYGROUPS_CONFIG", help="name=value, Kafka names (repeatable; `raygroups config` lists them)"),
    config_file: Optional[Path] = typer.Option(None, envvar="RAYGROUPS_CONFIG_FILE", help="a Kafka server.properties (Java properties syntax); broker settings raygroups has no use for are warned about"),
    metrics_port: Optional[str] = typer.Option(None, envvar="RAYGROUPS_METRICS_PORT", help="serve Prometheus metrics at http://HOST:PORT/metrics (0: a free port)"),
    dashboard: bool = typer.Option(False, "--dashboard", envvar="RAYGROUPS_DASHBOARD", help="start Ray's dashboard (embedded Ray only) and print its URL"),
) -> None:
    """Start a cluster and serve until SIGINT/SIGTERM; prints `READY host:port[,...]` when serving."""
    from cluster.server_properties import load_user_config, with_command_line_address

    overrides = {
        "raygroups.gateways": _setting_option("--gateways", "raygroups.gateways", gateways),
        "raygroups.coordinators": _setting_option("--coordinators", "raygroups.coordinators", coordinators),
        "raygroups.share.coordinators": _setting_option("--share-coordinators", "raygroups.share.coordinators", share_coordinators),
        "raygroups.partition.leaders": _setting_option("--partition-leaders", "raygroups.partition.leaders", partition_leaders),
        "raygroups.metrics.port": _setting_option("--metrics-port", "raygroups.metrics.port", metrics_port),
        "raygroups.dashboard": True if dashboard else None,
    }
    bind_port = _int_option("--port", port, 0, 65535)
    try:
        user = load_user_config(config, config_file)
    except ConfigError as exc:
        fail(str(exc))
    cfg = with_command_line_address(user, host, bind_port)
    cfg = cfg.with_overrides({k: v for k, v in overrides.items() if v is not None})
    if data_dir is not None and shared_data_dir is not None and data_dir.resolve() != shared_data_dir.resolve():
        fail("give --data-dir or --shared-data-dir, not two different directories")
    data_dir = shared_data_dir or data_dir or user.data_dir or Path("raygroups-data")
    host, bind_port = _client_listener_address(cfg, host or "127.0.0.1", 9092 if bind_port is None else bind_port)
    cfg = _advertised(cfg, advertised_host)
    for warning in user.warnings:
        err.print(f"[yellow]warning:[/] {warning}", highlight=False)
    from cluster.launcher import RayJoinError, start_cluster

    try:
        cluster = start_cluster(cfg, data_dir, host=host, port=bind_port, address=address)
    except RayJoinError as exc:
        fail(str(exc))
    except Exception as exc:
        from cluster.ray_logs import ray_log_dir

        fail(f"cluster did not start: {_one_line(exc)} (Ray's logs: {ray_log_dir()})")
    # After ray.init: Ray installs its own SIGTERM handler, which would kill us mid-shutdown.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {cluster.bootstrap}", flush=True)
    if cluster.joined:  # --address auto: which cluster it found, and how
        err.print(cluster.joined, highlight=False)
    for label, attribute in (("metrics", "metrics_url"), ("Ray dashboard", "dashboard_url")):
        url = getattr(cluster, attribute, None)
        if url:
            err.print(f"{label} at {url}", highlight=False)
    if cluster.operator_addresses:  # where the operator commands need no credentials
        err.print(f"operator API at {','.join(cluster.operator_addresses)}", highlight=False)
    err.print(f"[dim]data in {data_dir.resolve()}; Ctrl-C stops the cluster cleanly[/]")
    seen = 0
    try:
        while not stop.wait(1.0):
            try:
                seen, events = cluster.client.events_since_blocking(seen, timeout=5)
            except Exception:
                continue
            for e in events:
                stamp = time.strftime("%H:%M:%S", time.localtime(e["time"]))
                err.print(f"[dim]{stamp}[/] [bold]{e['kind']}[/] {e['message']}", highlight=False)
    finally:
        err.print("stopping…")
        cluster.stop()
        err.print("stopped")


@app.command("config")
def config_command(as_json: bool = JsonOption) -> None:
    """Every setting: name, default, range and meaning (Kafka's names and ranges where Kafka has them)."""
    rows = [
        {"name": s.name, "default": _shown(s.default), "range": s.range, "meaning": s.doc}
        for s in sorted(SETTINGS.values(), key=lambda s: s.name)
    ]
    if as_json:
        print_json(rows)
        return
    from cluster.cli_tables import settings_table

    console.print(settings_table(rows))


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _advertised(cfg: Config, advertised_host: str | None) -> Config:
    from cluster.advertised import parse_advertised, with_advertised_host

    try:
        if advertised_host is not None:
            cfg = with_advertised_host(cfg, advertised_host)
        parse_advertised(cfg["advertised.listeners"])
    except ValueError as exc:
        fail(str(exc))
    return cfg


def _client_listener_address(cfg: Config, host: str, port: int) -> tuple[str, int]:
    """Check the security settings before anything starts; `listeners`, when given, says where
    the gateways listen (gateway i on its port+i) instead of --host/--port."""
    from cluster.gateway.auth.client_listener import client_listener
    from cluster.gateway.auth.listeners import parse_listener
    from cluster.gateway.auth.principals import parse_super_users

    try:
        parse_super_users(cfg["super.users"])
        client_listener(cfg)
        listener = parse_listener(cfg["listeners"], cfg["listener.security.protocol.map"])
    except ValueError as exc:
        fail(str(exc))
    if listener is None:
        return host, port
    return listener.host or host, listener.port


# How the operator commands authenticate on a client listener, with a Kafka client's setting names
# (security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location) as environment
# variables, so that a password never sits on a command line.
_SECURITY_ENV = {
    "protocol": "RAYGROUPS_SECURITY_PROTOCOL",
    "mechanism": "RAYGROUPS_SASL_MECHANISM",
    "username": "RAYGROUPS_SASL_USERNAME",
    "password": "RAYGROUPS_SASL_PASSWORD",
    "ca_file": "RAYGROUPS_SSL_CA_LOCATION",
}


def operator_security(env: Mapping[str, str]) -> Security | None:
    given = {field: env[name] for field, name in _SECURITY_ENV.items() if env.get(name)}
    if not given:
        return None
    security = Security(**given)
    if security.protocol.upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        fail(f"RAYGROUPS_SECURITY_PROTOCOL must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got {security.protocol!r}")
    if security.sasl and not (security.username and security.password):
        fail("RAYGROUPS_SASL_USERNAME and RAYGROUPS_SASL_PASSWORD are needed with a SASL security protocol")
    return security


def _admin(bootstrap: str, op: str, **args: Any) -> Any:
    try:
        return admin_call(bootstrap, op, security=operator_security(os.environ), **args)
    except AdminError as exc:
        fail(str(exc))


@app.command()
def actors(bootstrap: str = BootstrapOption, as_json: bool = JsonOption) -> None:
    """Every actor: name, kind, node, alive, partitions led."""
    actor_list = _admin(bootstrap, "actors")
    if as_json:
        print_json(actors_document(actor_list, _admin(bootstrap, "status")["leaders"]))
        return
    console.print(actors_table(actor_list))


@app.command()
def status(bootstrap: str = BootstrapOption, as_json: bool = JsonOption) -> None:
    """The cluster at a glance: actors, nodes, leadership, topics, groups by state, share partitions in flight."""
    state = _admin(bootstrap, "status")
    actor_list = _admin(bootstrap, "actors")
    if as_json:
        print_json(status_document(state, actor_list))
        return
    print_status(state, actor_list)


@app.command()
def kill(
    name: Optional[str] = typer.Argument(None, help="actor name, as `raygroups actors` lists it"),
    coordinator_of: Optional[str] = typer.Option(None, "--coordinator-of", envvar="RAYGROUPS_COORDINATOR_OF",
                                                 help="the actor leading this group's __consumer_offsets partition"),
    leader_of: Optional[str] = typer.Option(None, "--leader-of", envvar="RAYGROUPS_LEADER_OF",
                                            help="the actor leading TOPIC-PARTITION, e.g. orders-3"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Hard-kill one actor (as ray.kill); the controller fails its partitions over."""
    from cluster.kill_target import KillTargetError, kill_target

    if sum(x is not None for x in (name, coordinator_of, leader_of)) != 1:
        fail("name one actor: ACTOR_NAME, --coordinator-of GROUP or --leader-of TOPIC-PARTITION")
    if name is None:
        try:
            name = kill_target(_admin(bootstrap, "status"), coordinator_of=coordinator_of, leader_of=leader_of)
        except KillTargetError as exc:
            fail(str(exc))
    _admin(bootstrap, "kill", name=name)
    console.print(f"killed {name}")


@app.command()
def pause(
    name: str = typer.Argument(..., help="actor name, as `raygroups actors` lists it"),
    seconds: float = typer.Option(5.0, "--seconds", "-s", envvar="RAYGROUPS_PAUSE_SECONDS", help="how long the actor stays stopped"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Stop one actor's process (SIGSTOP) for a while, then let it go on (SIGCONT)."""
    if not seconds > 0:
        fail(f"--seconds: must be more than 0, got {seconds:g}")
    result = _admin(bootstrap, "pause", name=name, seconds=seconds)
    console.print(f"{name} (pid {result['pid']}) was stopped for {result['seconds']:g} s and runs again")


@app.command()
def move(
    topic: str,
    partition: int,
    actor: str,
    bootstrap: str = BootstrapOption,
) -> None:
    """Move one partition's leadership to ACTOR by hand (new leader epoch)."""
    epoch = _admin(bootstrap, "move", topic=topic, partition=partition, actor=actor)
    console.print(f"{topic}-{partition} now led by {actor} at epoch {epoch}")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _add_user_commands() -> None:
    from cluster.user_commands import user_app

    app.add_typer(user_app, name="user")


_add_user_commands()


def _register_commands() -> None:
    """Commands other packages add (the load tests' experiment/check/report/demo), found through
    the `raygroups.commands` entry point so that this package never imports them."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="raygroups.commands"):
        try:
            entry.load()(app)
        except Exception as exc:  # a broken plugin must not take `raygroups up` down with it
            err.print(f"[yellow]warning:[/] commands from {entry.value} unavailable: {_one_line(exc)}")


_register_commands()


def main() -> None:  # pragma: no cover - console script entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
