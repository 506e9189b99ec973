"""The `python -m loadtest.bench` command line: one Typer app every command module registers on."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmarks: raygroups measured against a peer (the do-nothing responder, tansu) in the same run.")

PEER = typer.Option("responder", "--peer", help="responder, tansu, both, or a comma-separated list")
ROUNDS = typer.Option(2, "--rounds", help="runs per system, alternating; the best is kept")
JSON = typer.Option(None, "--json", help="also write the figures here")
JsonPath = Path | None
