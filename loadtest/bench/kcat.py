"""Produce and fetch through kcat (librdkafka's command-line client, in C): a load client that
is not the limit (issue 24). The Python loop of confluent-kafka's producer tops out near one core
before either server does; kcat reads its records from a file and leaves everything to librdkafka.

The benchmark installs nothing: `available()` says in one line what is missing (`apt-get install
kcat` on Debian). kcat runs pinned to the client's cores; its own CPU comes from wait4 when it ends,
the server's from every process of the system under test.

kcat runs on the librdkafka that confluent-kafka ships (2.16 here), so both clients speak the same
protocol versions: Debian 12's librdkafka 2.0.2 cannot read tansu 0.6's ApiVersions v3 answer
("Protocol read buffer underflow ... at 274/279") and never connects to it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from loadtest.bench import pinning

MISSING = "kcat (librdkafka's C client) is not installed: `apt-get install kcat` (Debian) or `brew install kcat`"

# librdkafka settings for throughput: batches of up to 10,000 records with 5 ms of linger,
# acks=all, no compression (the servers store what they get); idempotence off as in the
# confluent-kafka workload (tansu and raygroups both support it, but it is not what is measured).
_PRODUCE = ["-X", "acks=all", "-X", "linger.ms=5", "-X", "batch.num.messages=10000",
            "-X", "queue.buffering.max.messages=1000000", "-X", "enable.idempotence=false"]


def available() -> str | None:
    """The kcat binary, or None (see MISSING)."""
    return shutil.which("kcat")


def _librdkafka(tmp: Path) -> dict[str, str]:
    """The environment that loads confluent-kafka's librdkafka into kcat (the system's if it has none)."""
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    shipped = sorted(libs.glob("librdkafka-*.so.1"))
    if not shipped:
        return dict(os.environ)
    (tmp / "librdkafka.so.1").symlink_to(shipped[0])
    return {**os.environ, "LD_LIBRARY_PATH": f"{tmp}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":")}


def _run(args: list[str], env: dict[str, str], cores: frozenset[int] | None, server: set[int]) -> dict[str, float]:
    """Run kcat to its end: wall seconds, its CPU seconds, the server's CPU seconds meanwhile, and
    the lines it printed (a fetch prints one per record)."""
    server_before = pinning.cpu_seconds(server)
    start = time.perf_counter()
    # What it says goes to a file, not a pipe read only at the end: a kcat reporting many failed
    # deliveries would fill that pipe and block while this reads its output.
    with tempfile.TemporaryFile() as said:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=said, env=env,
                                preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
        lines = 0
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(1 << 20):
            lines += chunk.count(b"\n")
        # os.wait4 gives the child's own CPU (librdkafka's threads included) when it ends.
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        server_cpu = pinning.spent(server_before, pinning.cpu_seconds(server))
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            said.seek(0)
            raise RuntimeError(f"kcat exited {code}: {said.read().decode(errors='replace').strip()[-500:]}")
    return {"wall": wall, "client_cpu": usage.ru_utime + usage.ru_stime, "server_cpu": server_cpu, "lines": lines}


def produce_fetch_rates(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int,
                        cores: frozenset[int] | None, server: set[int]) -> dict[str, float]:
    """Records/s kcat produces (acks=all, keys spread over the partitions) and then fetches (-C,
    every partition from the start: assign(), no group), with both sides' cores busy. The fetch
    must read back every record produced, so a rate never counts records that were not stored.
    (Not the high watermarks: tansu 0.6's ListOffsets answers fewer, 585,398 of 600,000 records it
    then serves whole.)"""
    from loadtest.bench.clients import _client_cpu, create_topic

    kcat = available()
    if kcat is None:
        raise RuntimeError(MISSING)
    create_topic(bootstrap, topic, partitions)
    value = "v" * value_bytes
    with tempfile.TemporaryDirectory() as tmp:
        env = _librdkafka(Path(tmp))
        path = Path(tmp) / "records"
        with path.open("w") as lines:
            lines.writelines(f"key-{i:07d}:{value}\n" for i in range(records))
        produced = _run([kcat, "-P", "-b", bootstrap, "-t", topic, "-K", ":", "-q", *_PRODUCE, "-l", str(path)],
                        env, cores, server)
        # -e: it ends at the end of every partition, so a record missing ends it short of -c.
        fetched = _run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(records), "-e", "-q",
                        "-f", "%o\n", "-X", "fetch.wait.max.ms=100"], env, cores, server)
    if fetched["lines"] != records:
        raise RuntimeError(f"kcat produced {records:,} records (acks=all) but fetched {fetched['lines']:,} back")
    out: dict[str, float] = {}
    for phase, run in (("produce", produced), ("fetch", fetched)):
        out[f"{phase}_rps"] = records / run["wall"]
        out.update(_client_cpu(phase, records, run["client_cpu"], run["wall"]))
        out[f"{phase}_server_cores"] = run["server_cpu"] / run["wall"]
        # Per core when the client is the limit: the server's CPU per record, as a rate.
        out[f"{phase}_per_server_core"] = records / run["server_cpu"] if run["server_cpu"] > 0 else 0.0
    return out
