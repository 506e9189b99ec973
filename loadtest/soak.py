"""`python -m loadtest.soak`: the main job and the fault-kinds experiment, many times in a row.

One flaky run in six is a bug a single run hides (issue 20: `raygroups demo` failed one run in six
on double-acquisition). This runs `raygroups demo --duration D` N times and the shipped fault-kinds
scenario (loadtest/scenarios/fault-kinds.toml, every kind of fault) M times, one after another, each
as its own process with its own cluster, as a user runs them; prints one line per run (exit code,
each failing verdict with its violations, how long it took); keeps the run directory of every run
that did not pass every invariant and deletes the others (a run directory holds the cluster's
data); and exits 1 if any run failed.

    python -m loadtest.soak [--demos 20] [--fault-kinds 10] [--duration 30] [--out runs/soak]

Not a CI test: 30 runs take well over an hour here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

SCENARIO = Path(__file__).parent / "scenarios" / "fault-kinds.toml"
RAYGROUPS = str(Path(sys.executable).with_name("raygroups"))


@dataclass(slots=True)
class Outcome:
    name: str
    code: int
    seconds: float
    failing: list[str]  # "verdict (violations)" of each verdict that did not pass
    run_dir: Path

    @property
    def passed(self) -> bool:
        return self.code == 0 and not self.failing


def verdicts_of(run_dir: Path) -> list[str] | None:
    """Each verdict that did not pass, with its count; None when verdicts.json is missing."""
    path = run_dir / "verdicts.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return [f"{v['name']} ({v['violations']})" if v["status"] == "fail" else f"{v['name']} ({v['status']})"
            for v in data["verdicts"] if v["status"] not in ("pass", "n/a")]


def run_one(name: str, command: list[str], run_dir: Path, log: Path) -> Outcome:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    failing = verdicts_of(run_dir)
    if failing is None:
        failing = [f"no verdicts (exit {code}; see {log})"]
    return Outcome(name, code, time.monotonic() - started, failing, run_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--demos", type=int, default=20, help="runs of `raygroups demo` (default 20)")
    parser.add_argument("--fault-kinds", type=int, default=10, help="runs of the fault-kinds scenario (default 10)")
    parser.add_argument("--duration", type=float, default=30, help="the demo's --duration in seconds (default 30)")
    parser.add_argument("--out", type=Path, default=Path("runs/soak"), help="where the run directories go")
    args = parser.parse_args(argv)
    console = Console()
    args.out.mkdir(parents=True, exist_ok=True)
    plan = [(f"demo-{i + 1:02d}", [RAYGROUPS, "demo", "--duration", f"{args.duration:g}"]) for i in range(args.demos)]
    plan += [(f"fault-kinds-{i + 1:02d}", [RAYGROUPS, "experiment", str(SCENARIO)]) for i in range(args.fault_kinds)]
    outcomes = []
    for n, (name, command) in enumerate(plan, 1):
        run_dir = args.out / name
        if run_dir.exists():
            shutil.rmtree(run_dir)
        with console.status(f"[{n}/{len(plan)}] {name} …"):
            outcome = run_one(name, [*command, "--out", str(run_dir)], run_dir, args.out / f"{name}.log")
        outcomes.append(outcome)
        if outcome.passed:
            shutil.rmtree(run_dir, ignore_errors=True)
            (args.out / f"{name}.log").unlink(missing_ok=True)
            console.print(f"{n:>3}/{len(plan)} {name:<15} [green]pass[/]  every invariant  {outcome.seconds:6.0f} s")
        else:
            console.print(f"{n:>3}/{len(plan)} {name:<15} [red]FAIL[/]  {', '.join(outcome.failing)}  "
                          f"{outcome.seconds:6.0f} s  kept {run_dir}")
    failed = [o for o in outcomes if not o.passed]
    console.print(f"{len(outcomes) - len(failed)} of {len(outcomes)} runs passed every invariant"
                  + (f"; kept: {', '.join(str(o.run_dir) for o in failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
