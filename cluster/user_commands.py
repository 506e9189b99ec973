"""`raygroups user add|list|delete`: SCRAM users in a data directory's credential store, before or
while the cluster runs (gateways re-read the store when it changes), as Kafka's
`kafka-storage format --add-scram`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from cluster.cli_output import fail

user_app = typer.Typer(help="SCRAM users (SASL/SCRAM-SHA-256/512 and PLAIN) of a data directory.", no_args_is_help=True)

DataDir = typer.Option(Path("raygroups-data"), "--data-dir", envvar="RAYGROUPS_DATA_DIR", help="the cluster's data directory")


def _store(data_dir: Path):
    from cluster.gateway.auth.credentials import CredentialStore, path_in

    return CredentialStore(path_in(data_dir))


@user_app.command("add")
def add(
    name: str,
    data_dir: Path = DataDir,
    password: Optional[str] = typer.Option(None, "--password", envvar="RAYGROUPS_USER_PASSWORD",
                                           help="the password (else asked for; or RAYGROUPS_USER_PASSWORD)"),
    mechanism: list[str] = typer.Option(["SCRAM-SHA-256", "SCRAM-SHA-512"], "--mechanism", envvar="RAYGROUPS_USER_MECHANISM",
                                        help="repeatable"),
    iterations: int = typer.Option(4096, envvar="RAYGROUPS_USER_ITERATIONS",
                                   help="PBKDF2 iterations, 4096 to 16384 (Kafka's ScramMechanism bounds)"),
) -> None:
    """Add a user, or change its password (salted credentials for each mechanism)."""
    from cluster.gateway.auth.scram import make_credential

    if password is None:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    if not name:
        fail("a user name must not be empty")
    try:
        credentials = [(name, make_credential(m.upper(), password, iterations=iterations)) for m in mechanism]
    except ValueError as exc:
        fail(str(exc))
    os.makedirs(data_dir, exist_ok=True)
    _store(data_dir).change(upserts=credentials)
    typer.echo(f"user {name} added ({', '.join(c.mechanism for _, c in credentials)})")


@user_app.command("list")
def list_users(data_dir: Path = DataDir) -> None:
    """Users and their mechanisms (never a secret)."""
    for name, mechanisms in sorted(_store(data_dir).users().items()):
        typer.echo(f"{name}\t" + ",".join(f"{m}(iterations={c.iterations})" for m, c in sorted(mechanisms.items())))


@user_app.command("delete")
def delete(name: str, data_dir: Path = DataDir) -> None:
    """Remove a user's credentials (every mechanism)."""

    store = _store(data_dir)
    mechanisms = store.users().get(name)
    if not mechanisms:
        fail(f"no user named {name!r} in {data_dir}")
    store.change(deletions=[(name, m) for m in mechanisms])
    typer.echo(f"user {name} deleted")
