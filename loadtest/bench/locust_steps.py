"""How many classic members locust workers sustain: heartbeats every 3 s, p99 below 100 ms.

Each step runs loadtest/locustfile.py headless (one process, or a master with N workers) with
`users` classic members that only keep their membership (`--no-fetch`: join, sync, heartbeat
every 3 s, commit), lets them spawn, resets the statistics (`--reset-stats`) and measures
`seconds` of steady state: the Heartbeat p99 and rate from locust's own stats CSV, counted until
the test starts stopping (`--stats-until-stop`: a thousand users leaving their groups at once
made the p99 a coin toss, 23 to 450 ms in three runs of one step against the responder). The same step
against the do-nothing responder shows what the locust processes alone can carry on this
machine; the cluster shares the machine with them. The responder runs with --group-size: each
member follows and gets its place's range share of the partitions, as in a group of ten against
raygroups (as its own group's leader, a member assigned and committed all twelve, and the
responder's limit was the client's heavier work: 1,250 members where raygroups carried 2,000).
"""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LOCUST = str(Path(sys.executable).with_name("locust"))
# Each step's groups and topic: the responder is started with the same (commands_locust.py), so that
# its members hold and commit the share of the partitions a group member holds against raygroups.
MEMBERS_PER_GROUP = 10
PARTITIONS = 12
LOCUSTFILE = str(Path(__file__).parents[1] / "locustfile.py")  # loadtest/locustfile.py, the one users run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_step(bootstrap: str, users: int, workers: int, seconds: float, prefix: str, interval_ms: int = 3_000) -> dict[str, Any]:
    spawn_rate = max(users / 20, 10)
    run_time = int(users / spawn_rate + seconds + 5)
    with tempfile.TemporaryDirectory(prefix="raygroups-locust-") as tmp:
        out = Path(tmp) / "stats"
        common = ["-f", LOCUSTFILE, "--host", bootstrap, "--headless", "-u", str(users), "-r", f"{spawn_rate:g}",
                  "-t", f"{run_time}s", "--csv", str(out), "--only-summary", "--reset-stats", "--stop-timeout", "10",
                  "--no-fetch", "--producers", "0", "--share-ratio", "0", "--members-per-group", str(MEMBERS_PER_GROUP),
                  "--partitions", str(PARTITIONS),
                  "--groups", str(max(users // MEMBERS_PER_GROUP, 1)), "--heartbeat-interval-ms", str(interval_ms),
                  "--session-timeout-ms", "30000", "--prefix", prefix, "--loglevel", "ERROR", "--stats-until-stop"]
        if workers <= 1:
            done = subprocess.run([LOCUST, *common], capture_output=True, text=True, timeout=run_time + 180)
        else:
            port = _free_port()
            master = subprocess.Popen([LOCUST, *common, "--master", "--master-bind-port", str(port), "--expect-workers",
                                       str(workers)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            procs = [subprocess.Popen([LOCUST, "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1",
                                       "--master-port", str(port), "--loglevel", "ERROR"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
            output, _ = master.communicate(timeout=run_time + 180)
            for p in procs:
                p.wait(60)
            done = subprocess.CompletedProcess(master.args, master.returncode, output, "")
        rows = {r["Type"]: r for r in csv.DictReader(open(f"{out}_stats.csv")) if r["Type"]}
    beat = rows.get("Heartbeat")
    if beat is None:
        raise RuntimeError(f"locust reported no heartbeats (exit {done.returncode}): {done.stdout[-1500:]}{done.stderr[-1500:]}")
    failures = sum(int(r["Failure Count"]) for t, r in rows.items() if t != "Aggregated")
    return {"users": users, "workers": workers, "heartbeat_p99_ms": float(beat["99%"]), "heartbeat_p50_ms": float(beat["50%"]),
            "heartbeats_per_s": float(beat["Requests/s"]), "failures": failures}
