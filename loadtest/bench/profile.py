"""Where the time goes: a top-N table of functions by self time from py-spy's raw output.

    py-spy record --subprocesses --nonblocking -f raw -o run.txt -- python -m loadtest.bench group-requests ...
    python -m loadtest.bench profile-top run.txt [--process GroupCoordinator]

py-spy writes one line per distinct stack, frames separated by ';' from the root, then the sample
count; with --subprocesses the root frame names the process. Self time is the samples whose last
frame is the function; total time is the samples with the function anywhere on the stack.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.table import Table

from loadtest.bench.app import app
from loadtest.bench.systems import console

_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")


def _name(frame: str) -> str:
    """`function (path/to/file.py:12)` -> `function (file.py)`: lines apart, one function."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    parts = m["file"].split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else m["file"]
    return f"{m['fn']} ({short})"


@dataclass
class Profile:
    total: int = 0
    self_time: Counter = field(default_factory=Counter)
    inclusive: Counter = field(default_factory=Counter)
    processes: Counter = field(default_factory=Counter)


def read(path: Path | list[Path], process: str = "", under: str = "") -> Profile:
    """`process`: keep processes whose command line has it; `under`: keep stacks with a frame that has it."""
    prof = Profile()
    paths = [path] if isinstance(path, Path) else path
    lines = [line for p in paths for p in (sorted(p.glob("*.raw")) if p.is_dir() else [p])
             for line in p.read_text(errors="replace").splitlines()]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        root = frames[0] if frames[0].startswith("process ") else ""
        if process and process not in root:
            continue
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames or (under and not any(under in f for f in frames)):
            continue
        n = int(count)
        prof.total += n
        prof.processes[root.split(":", 1)[-1][:60] or "?"] += n
        prof.self_time[_name(frames[-1])] += n
        for name in {_name(f) for f in frames}:
            prof.inclusive[name] += n
    return prof


def top_table(prof: Profile, n: int, title: str) -> Table:
    table = Table(title=title)
    for col, justify in (("function (file)", "left"), ("self %", "right"), ("total %", "right")):
        table.add_column(col, justify=justify)
    for name, count in prof.self_time.most_common(n):
        table.add_row(name, f"{100 * count / prof.total:.1f}", f"{100 * prof.inclusive[name] / prof.total:.1f}")
    return table


@app.command("profile-top")
def profile_top(
    raw: list[Path] = typer.Argument(..., help="py-spy raw files, or directories of *.raw files"),
    top: int = 10,
    process: str = typer.Option("", help="only processes whose command line contains this (e.g. ray::)"),
    under: str = typer.Option("", help="only stacks through a frame containing this (e.g. LogDisk._replay)"),
    markdown: bool = typer.Option(False, help="print a Markdown table (for docs/performance.md)"),
) -> None:
    """Top functions by self time in a py-spy raw profile (py-spy record -f raw)."""
    prof = read(raw, process, under)
    if markdown:
        print("| function (file) | self % | total % |\n|---|---:|---:|")
        for name, count in prof.self_time.most_common(top):
            print(f"| `{name}` | {100 * count / prof.total:.1f} | {100 * prof.inclusive[name] / prof.total:.1f} |")
        return
    console.print(top_table(prof, top, f"{' '.join(p.name for p in raw)}: {prof.total:,} samples"))
    for proc, count in prof.processes.most_common(8):
        console.print(f"  {100 * count / prof.total:5.1f}%  {proc}")
