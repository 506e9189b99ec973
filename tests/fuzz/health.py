"""The cluster's health while fuzzed frames hit it: a probe a well-behaved client runs every few seconds.

Each probe, on a fresh connection, does what a user's client needs to work: ApiVersions, Metadata of
a topic of its own (created at the first probe), a Produce with acks=-1 of one record and a Fetch
that reads that very record back; then, over the operator API, every partition has a live leader
and every actor is alive (the fuzzed frames may be aimed at the gateway, but a crashed actor or a
leaderless partition behind it is as much a failure). A probe that fails or takes longer than its
bound fails the soak: a gateway that still accepts connections but no longer serves is caught too.

A partition is leaderless for a moment after a fuzzed CreateTopics or CreatePartitions: the topic is
in the metadata before its first leader has loaded (clients read LEADER_NOT_AVAILABLE then, as from
Kafka right after a creation). So a partition fails the soak when it is still without a leader at
the next probe, seconds later (the soak's first 1,000,000-frame run stopped on one such moment).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from cluster.admin_client import admin_call
from cluster.gateway.apis import ApiKey
from cluster.recordbatch import encode_records, iter_batches
from tests.kio_client import KioClient

TOPIC = "fuzz-health"


@dataclass(slots=True)
class HealthLog:
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if not self.latencies_ms:
            return "no health probe ran"
        ms = sorted(self.latencies_ms)
        return (f"{len(ms)} health probes, {len(self.failures)} failed; round trip p50 "
                f"{statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms")


def probe(bootstrap: str, bound_s: float, serial: int) -> set[tuple[str, int]]:
    """One probe: the partitions without a leader now; raises AssertionError (or an I/O error)
    saying what did not work."""
    value = f"health-{serial}-{time.time_ns()}".encode()
    with KioClient(bootstrap, timeout=bound_s) as client:
        assert client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz-health",
                                                      "client_software_version": "1"}).error_code == ErrorCode.none
        metadata = client.call(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                                     "allow_auto_topic_creation": True,
                                                     "include_topic_authorized_operations": False})
        topic = metadata.topics[0]
        if topic.error_code != ErrorCode.none:  # being created: the next probe finds it
            assert topic.error_code in (ErrorCode.leader_not_available, ErrorCode.unknown_topic_or_partition), topic
            return set()
        batch = encode_records([(0, b"health", value)], int(time.time() * 1000))
        body = {"acks": -1, "timeout": int(bound_s * 1000),
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]}
        part = client.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none, f"Produce answered {part.error_code.name}"
        fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                 "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": part.base_offset,
                                                             "partition_max_bytes": 1 << 20}]}]}
        read = client.call(ApiKey.FETCH, 12, fetch).responses[0].partitions[0]
        assert read.error_code == ErrorCode.none, f"Fetch answered {read.error_code.name}"
        assert any(h.base_offset <= part.base_offset <= h.last_offset for _, h in iter_batches(read.records or b"")), \
            f"the record produced at offset {part.base_offset} was not read back"
    status = admin_call(bootstrap, "status", bound_s)
    actors = admin_call(bootstrap, "actors", bound_s)
    dead = sorted(a["name"] for a in actors if not a["alive"])
    assert not dead, f"actors dead: {dead}"
    led = {(lead["topic"], lead["partition"]) for lead in status["leaders"]}
    wanted = {(t["name"], p) for t in status["topics"] for p in range(t["partitions"])}
    return wanted - led


class HealthWatch:
    """Probes every `every_s` seconds in a thread until stopped; a failed probe stops the soak."""

    def __init__(self, bootstrap: str, every_s: float, bound_s: float) -> None:
        self.bootstrap, self.every_s, self.bound_s = bootstrap, every_s, bound_s
        self.log = HealthLog()
        self.failed = threading.Event()
        self.leaderless: set[tuple[str, int]] = set()  # at the last probe
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> HealthLog:
        self._stop.set()
        self._thread.join()
        self.check_once()  # one last look at what the frames left behind
        if self.leaderless and not self.failed.is_set():
            time.sleep(self.every_s)  # a creation the last frames began: give it a probe's time
            self.check_once()
        return self.log

    def check_once(self) -> None:
        serial = len(self.log.latencies_ms) + len(self.log.failures)
        started = time.monotonic()
        try:
            leaderless = probe(self.bootstrap, self.bound_s, serial)
            stuck = leaderless & self.leaderless
            self.leaderless = leaderless
            assert not stuck, f"partitions without a leader at two probes in a row: {sorted(stuck)[:5]}"
        except Exception as exc:  # noqa: BLE001 - every way a probe fails is a failure of the soak
            self.log.failures.append(f"probe {serial}: {type(exc).__name__}: {exc}")
            self.failed.set()
            return
        took = (time.monotonic() - started) * 1000
        self.log.latencies_ms.append(took)
        if took > self.bound_s * 1000:
            self.log.failures.append(f"probe {serial}: took {took:.0f} ms, above the bound of {self.bound_s:.0f} s")
            self.failed.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.check_once()
