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
from rich.table import Table

from cluster.admin_client import AdminError, Security, admin_call
from cluster.cli_output import console, err, fail
from cluster.config import Config, ConfigError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Kafka group coordination (classic and share groups) on Ray actors.",
)

DEFAULT_BOOTSTRAP = os.environ.get("RAYGROUPS_BOOTSTRAP", "127.0.0.1:9092")
BootstrapOption = typer.Option(DEFAULT_BOOTSTRAP, "--bootstrap", "-b", help="a gateway, host:port")


def load_config(pairs: list[str], config_file: Path | None, overrides: dict[str, Any]) -> Config:
    try:
        config = Config.load(pairs, config_file)
    except ConfigError as exc:
        fail(str(exc))
    return config.with_overrides({k: v for k, v in overrides.items() if v is not None})


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="address the gateways listen on (0.0.0.0: every interface)"),
    advertised_host: Optional[str] = typer.Option(None, help="address clients are told to connect to (Kafka's advertised.listeners host); default: --host, or the node's IP when --host is 0.0.0.0"),
    port: int = typer.Option(9092, help="first gateway port (gateway i listens on port+i; 0 picks free ports)"),
    gateways: Optional[str] = typer.Option(None, help="gateways (brokers as clients see them): a count, or per-node (one on each Ray node; the default on a multi-node cluster)"),
    address: Optional[str] = typer.Option(None, help="join this Ray cluster (auto for the one `ray start` recorded, ray://host:port or host:port); without it an embedded Ray starts"),
    data_dir: Optional[Path] = typer.Option(None, help="where partition logs live; reused on restart [default: raygroups-data]"),
    shared_data_dir: Optional[Path] = typer.Option(None, help="the data directory, on storage every Ray node mounts (NFS, a shared volume); required on more than one node"),
    coordinators: Optional[int] = typer.Option(None, help="group coordinator actors"),
    share_coordinators: Optional[int] = typer.Option(None, help="share coordinator actors"),
    partition_leaders: Optional[int] = typer.Option(None, help="partition leader actors"),
    config: list[str] = typer.Option([], "--config", "-c", help="name=value, Kafka names (repeatable)"),
    config_file: Optional[Path] = typer.Option(None, help="server.properties-style file"),
) -> None:
    """Start a cluster and serve until SIGINT/SIGTERM; prints `READY host:port[,...]` when serving."""
    cfg = load_config(
        config,
        config_file,
        {
            "raygroups.gateways": _gateway_count(gateways),
            "raygroups.coordinators": coordinators,
            "raygroups.share.coordinators": share_coordinators,
            "raygroups.partition.leaders": partition_leaders,
        },
    )
    if port < 0 or port > 65535:
        fail(f"--port must be 0..65535, got {port}")
    if data_dir is not None and shared_data_dir is not None and data_dir.resolve() != shared_data_dir.resolve():
        fail("give --data-dir or --shared-data-dir, not two different directories")
    data_dir = shared_data_dir or data_dir or Path("raygroups-data")
    host, port = _client_listener_address(cfg, host, port)
    cfg = _advertised(cfg, advertised_host)
    from cluster.launcher import RayJoinError, start_cluster

    try:
        cluster = start_cluster(cfg, data_dir, host=host, port=port, address=address,
                                shared_data_dir=shared_data_dir is not None)
    except RayJoinError as exc:
        fail(str(exc))
    except Exception as exc:
        fail(f"cluster did not start: {_one_line(exc)}")
    # After ray.init: Ray installs its own SIGTERM handler, which would kill us mid-shutdown.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {cluster.bootstrap}", flush=True)
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


def _gateway_count(text: str | None) -> int | str | None:
    from cluster.config import SETTINGS

    if text is None:
        return None
    try:
        return SETTINGS["raygroups.gateways"].parse(text)
    except ValueError as exc:
        fail(f"--gateways: {exc}")


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


def _actors_table(actors: list[dict[str, Any]]) -> Table:
    table = Table(title="actors")
    for col in ("name", "kind", "node", "alive", "partitions led", "detail"):
        table.add_column(col)
    for a in sorted(actors, key=lambda a: (a["kind"], a["name"])):
        parts = a.get("partitions") or []
        detail = a.get("address", "")
        if a["kind"] == "gateway" and "connections" in a:
            detail = f"{detail} conns={a['connections']} reqs={a['requests']}"
        if a.get("error"):
            detail = a["error"]
        table.add_row(
            a["name"],
            a["kind"],
            (a.get("node_id") or "")[:8],
            "[green]yes[/]" if a["alive"] else "[red]dead[/]",
            str(len(parts)),
            detail,
        )
    return table


def _share_partitions_table(share_partitions: list[dict[str, Any]]) -> Table:
    """In-flight records of the share partitions the partition leaders hold (KIP-1226's direction)."""
    table = Table(title="share partitions in flight (on their leaders)")
    for col in ("group", "topic-partition", "start", "end", "available", "acquired", "acknowledged", "archived"):
        table.add_column(col, justify="left" if col in ("group", "topic-partition") else "right")
    for sp in sorted(share_partitions, key=lambda x: (x["group"], x["topic"], x["partition"])):
        table.add_row(
            sp["group"],
            f"{sp['topic']}-{sp['partition']}",
            str(sp["start_offset"]),
            str(sp["end_offset"]),
            *(str(sp.get(k, 0)) for k in ("available", "acquired", "acknowledged", "archived")),
        )
    return table


@app.command()
def actors(bootstrap: str = BootstrapOption) -> None:
    """Every actor: name, kind, node, alive, partitions led."""
    console.print(_actors_table(_admin(bootstrap, "actors")))


@app.command()
def status(bootstrap: str = BootstrapOption) -> None:
    """The cluster at a glance: actors, nodes, leadership, topics, groups by state, share partitions in flight."""
    state = _admin(bootstrap, "status")
    actor_list = _admin(bootstrap, "actors")
    console.print(_actors_table(actor_list))
    nodes = sorted({a.get("node_id") or "?" for a in actor_list if a["alive"]})
    console.print(f"[bold]{len(nodes)}[/] Ray node(s): " + ", ".join(n[:8] for n in nodes))
    topics = Table(title="topics")
    for col in ("topic", "partitions", "internal", "leaders (actor: partitions)"):
        topics.add_column(col)
    by_topic: dict[str, dict[str, int]] = {}
    for lead in state["leaders"]:
        by_topic.setdefault(lead["topic"], {}).setdefault(lead["actor"], 0)
        by_topic[lead["topic"]][lead["actor"]] += 1
    for t in state["topics"]:
        spread = ", ".join(f"{a}: {n}" for a, n in sorted(by_topic.get(t["name"], {}).items()))
        topics.add_row(t["name"], str(t["partitions"]), "yes" if t["internal"] else "", spread or "[red]none[/]")
    console.print(topics)
    groups = Table(title="groups")
    for col in ("type", "state", "groups"):
        groups.add_column(col)
    for group_type, by_state in sorted(state.get("groups", {}).items()):
        for group_state, count in sorted(by_state.items()):
            groups.add_row(group_type, group_state, str(count))
    if not state.get("groups"):
        groups.add_row("", "none yet", "0")
    console.print(groups)
    share_partitions = [sp for a in actor_list for sp in a.get("share_partitions") or []]
    if share_partitions:
        console.print(_share_partitions_table(share_partitions))
    if state["events"]:
        events = Table(title="recent events")
        events.add_column("time")
        events.add_column("event")
        events.add_column("detail")
        for e in state["events"][-10:]:
            events.add_row(time.strftime("%H:%M:%S", time.localtime(e["time"])), e["kind"], e["message"])
        console.print(events)


@app.command()
def kill(name: str = typer.Argument(..., help="actor name, as `raygroups actors` lists it"), bootstrap: str = BootstrapOption) -> None:
    """Hard-kill one actor (as ray.kill); the controller fails its partitions over."""
    _admin(bootstrap, "kill", name=name)
    console.print(f"killed {name}")


@app.command()
def pause(
    name: str = typer.Argument(..., help="actor name, as `raygroups actors` lists it"),
    seconds: float = typer.Option(5.0, "--seconds", "-s", help="how long the actor stays stopped"),
    bootstrap: str = BootstrapOption,
) -> None:
    """Stop one actor's process (SIGSTOP) for a while, then let it go on (SIGCONT)."""
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
