"""Where the CLI's commands print: tables on stdout, one-line errors on stderr (exit 2)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

# Piped output (scripts, tests) is not cut at 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=200)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=200)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)
