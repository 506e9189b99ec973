"""Where the CLI's commands print: tables on stdout, one-line errors on stderr (exit 2)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

# Piped output (scripts, tests) is not cut at 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=200)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=200)


def fail(message: str, code: int = 2) -> None:
    # The message is text, not markup: "[dashboard]" or "[::1]:9092" must print as given.
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(code)
