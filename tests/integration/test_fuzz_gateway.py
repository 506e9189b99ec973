"""The structured fuzz against a real one-gateway cluster (issue 10): thousands of fuzzed frames
over several connections while a confluent-kafka bystander keeps producing and consuming. The
gateway process never dies (same pid, no death event) and the bystander is served throughout."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cluster.admin_client import admin_call
from cluster.gateway.apis import SUPPORTED
from tests.clients import create_topic
from tests.cluster_process import ClusterProcess
from tests.fuzz.frames import frames
from tests.fuzz.health import HealthWatch
from tests.fuzz.remote import BOMBS, NAMES, run_remote

pytestmark = pytest.mark.slow

FRAMES = 3000


@pytest.fixture(scope="module")
def one_gateway(tmp_path_factory):
    # One gateway: if the fuzz took it down, nothing would be reachable.
    proc = ClusterProcess(tmp_path_factory.mktemp("data"), gateways=1).start()
    yield proc
    proc.stop()


class Bystander:
    """Produces one record and waits to consume it, over and over; notes when each came back."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bystander-{uuid.uuid4()}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.topic = topic
        self.round_trips: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            value = b"bystander-%d" % i
            self.producer.produce(self.topic, value, partition=0)
            self.producer.flush(30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not self.stop.is_set():
                msg = self.consumer.poll(0.5)
                if msg is not None and msg.error() is None and msg.value() == value:
                    self.round_trips.append(time.monotonic())
                    break
            i += 1

    def __enter__(self) -> "Bystander":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.consumer.close()


def _gateway_pids(bootstrap: str) -> dict[str, int]:
    return {a["name"]: a["pid"] for a in admin_call(bootstrap, "actors") if a["name"].startswith("gateway")}


def test_fuzzed_frames_never_take_the_gateway_down_and_a_bystander_is_served(one_gateway):
    bootstrap = one_gateway.bootstrap
    create_topic(bootstrap, "bystander", 1)
    pids = _gateway_pids(bootstrap)
    with Bystander(bootstrap, "bystander") as bystander:
        while not bystander.round_trips:  # served before the fuzz starts
            assert bystander.thread.is_alive()
            time.sleep(0.1)
        started = time.monotonic()
        outcomes = run_remote(bootstrap, frames(11, FRAMES, set(SUPPORTED) - BOMBS, NAMES), connections=8)
        ended = time.monotonic()
        served = len(bystander.round_trips)
        while len(bystander.round_trips) == served:  # and after it
            assert bystander.thread.is_alive() and time.monotonic() - ended < 60
            time.sleep(0.1)
    assert sum(outcomes.values()) == FRAMES
    assert outcomes["reply"] > 0 and outcomes["close"] > 0, outcomes
    during = [t for t in bystander.round_trips if started <= t <= ended]
    assert during, "the bystander was not served while the fuzz ran"
    marks = [started, *during, ended]
    assert max(b - a for a, b in zip(marks, marks[1:])) < 20, "the bystander waited over 20 s"
    assert _gateway_pids(bootstrap) == pids
    assert "died" not in one_gateway.events()


def test_the_fuzz_soaks_health_probe_reads_its_own_record_back_and_sees_every_partition_led(one_gateway):
    """The probe `python -m tests.fuzz --bootstrap` runs as it goes (tests/fuzz/health.py)."""
    watch = HealthWatch(one_gateway.bootstrap, every_s=60, bound_s=30)
    for _ in range(3):  # the first may find its topic still being created
        watch.check_once()
    assert not watch.log.failures, watch.log.failures
    assert len(watch.log.latencies_ms) == 3


def test_a_health_probe_against_no_gateway_fails():
    watch = HealthWatch("127.0.0.1:1", every_s=60, bound_s=2)
    watch.check_once()
    assert watch.failed.is_set() and "ConnectionRefusedError" in watch.log.failures[0]
