"""py-spy on the Ray actors of a benchmark run: `python -m loadtest.bench profile-actors`.

`py-spy --subprocesses` on the bench does not reach the actors (the raylet, a C++ child of the
driver, starts them), so this runs the bench command, waits for its ray:: worker processes (the
driver's descendants) and records each for a while once the load is steady, one raw file a process
whose root frame names it; `profile-top` reads them together.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import typer

from loadtest.bench.app import app
from loadtest.bench.pinning import children  # the process tree from /proc, one copy
from loadtest.bench.systems import console

PY_SPY = str(Path(sys.executable).with_name("py-spy"))


def actors_of(root: int, names: tuple[str, ...]) -> dict[int, str]:
    """ray:: processes under `root` whose command line has one of `names`."""
    tree, found, todo = children(), {}, [root]
    while todo:
        for pid in tree.get(todo.pop(), []):
            todo.append(pid)
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            if cmd.startswith("ray::") and any(n in cmd for n in names):
                found[pid] = cmd
    return found


@app.command("profile-actors", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def profile_actors(
    ctx: typer.Context,
    out: Path = typer.Option(Path("profiles"), help="directory for one raw py-spy file per actor"),
    after: float = typer.Option(30.0, help="seconds after the actors appear before recording (joins, warm-up)"),
    seconds: int = typer.Option(10, help="seconds recorded"),
    actors: str = typer.Option("Gateway,GroupCoordinator,PartitionLeader,ShareCoordinator", help="actor names"),
    rate: int = 50,
) -> None:
    """Profile the actors while the bench command given after the options runs (e.g. group-requests --peer none)."""
    out.mkdir(parents=True, exist_ok=True)
    bench = subprocess.Popen([sys.executable, "-m", "loadtest.bench", *ctx.args])
    try:
        names = tuple(actors.split(","))
        while not (found := actors_of(bench.pid, names)) and bench.poll() is None:
            time.sleep(0.5)
        time.sleep(after)
        found = actors_of(bench.pid, names)
        console.print(f"recording {len(found)} actors for {seconds} s: {sorted(set(found.values()))}")
        spies = {pid: subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--nonblocking", "-r", str(rate),
                                        "-d", str(seconds), "-f", "raw", "-o", str(out / f"{pid}.raw")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for pid in found}
        for pid, spy in spies.items():
            spy.wait(seconds + 60)
            raw = out / f"{pid}.raw"
            if raw.exists():  # name the process in the root frame, as --subprocesses does
                name = found[pid].split()[0]
                raw.write_text("".join(f'process {pid}:"{name}";{line}\n' for line in raw.read_text().splitlines()))
        bench.wait()
    finally:
        if bench.poll() is None:
            bench.terminate()
            bench.wait(60)
