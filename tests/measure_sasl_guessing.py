"""Other clients' latency while threads guess SASL/PLAIN passwords (issue 21): a measurement, not a test.

Starts a one-gateway cluster with a SASL_PLAINTEXT listener and a user, then one authenticated
client sends ApiVersions and Metadata one after another: first alone, then while GUESSERS threads
each connect, send SaslHandshake PLAIN and a SaslAuthenticate with a wrong password, read the answer
and start over. Prints each phase's p50/p99 per API and the guessers' attempts per second.

    .venv/bin/python -m tests.measure_sasl_guessing [--seconds 20] [--guessers 4]

To measure another checkout, run it from there with PYTHONPATH pointing at it (the cluster's
processes inherit it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from cluster.gateway.apis import ApiKey
from tests.cluster_process import RAYGROUPS, ClusterProcess
from tests.kio_client import KioClient

METADATA = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
API_VERSIONS = {"client_software_name": "measure", "client_software_version": "1"}


def authenticated(bootstrap: str, password: str) -> KioClient:
    client = KioClient(bootstrap, timeout=30)
    client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    answer = client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + password.encode()})
    if answer.error_code != 0:
        client.close()
        raise PermissionError(answer.error_message)
    return client


def guess(bootstrap: str, stop: threading.Event, attempts: list[int]) -> None:
    while not stop.is_set():
        try:
            authenticated(bootstrap, "wrong")
        except (PermissionError, ConnectionError, OSError):
            pass
        attempts.append(1)


def latencies(client: KioClient, seconds: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"ApiVersions": [], "Metadata": []}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, key, version, body in (("ApiVersions", ApiKey.API_VERSIONS, 3, API_VERSIONS),
                                         ("Metadata", ApiKey.METADATA, 12, METADATA)):
            started = time.perf_counter()
            client.call(key, version, body)
            out[name].append((time.perf_counter() - started) * 1000)
    return out


def report(phase: str, measured: dict[str, list[float]]) -> None:
    for name, values in measured.items():
        values.sort()
        p99 = values[int(len(values) * 0.99)]
        print(f"{phase:>10} {name:<11} n={len(values):6d} p50={statistics.median(values):7.2f} ms p99={p99:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--guessers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subprocess.run([RAYGROUPS, "user", "add", "alice", "--data-dir", str(data), "--password", "alice-pw"],
                       check=True, capture_output=True)
        cluster = ClusterProcess(data, "--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0", gateways=1).start()
        try:
            client = authenticated(cluster.bootstrap, "alice-pw")
            latencies(client, 2)  # warm up
            report("alone", latencies(client, args.seconds))
            stop, attempts = threading.Event(), []
            threads = [threading.Thread(target=guess, args=(cluster.bootstrap, stop, attempts), daemon=True)
                       for _ in range(args.guessers)]
            for thread in threads:
                thread.start()
            started = time.monotonic()
            report("guessing", latencies(client, args.seconds))
            rate = len(attempts) / (time.monotonic() - started)
            stop.set()
            for thread in threads:
                thread.join(30)
            print(f"{args.guessers} guessing threads: {rate:.0f} failed logins/s")
            client.close()
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
