"""The driver core's answer and wakeup paths (loadtest/drivers/core.py) and the Broker's label."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from loadtest.drivers.core import DriverCore
from loadtest.members.machine import Broker, Machine, Send

BROKER = Broker("127.0.0.1", 9092)


@dataclass(frozen=True)
class _Answer:
    text: str


class _Conn:
    def __init__(self) -> None:
        self.sent: list[Send] = []

    def send(self, machine: Machine, send: Send) -> None:
        self.sent.append(send)

    def close(self) -> None:
        pass


class _Driver(DriverCore):
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        super().__init__(self.rows.extend, "test")
        self.armed: dict[int, float | None] = {}

    def open(self, key: Any) -> _Conn:
        return _Conn()

    def arm(self, machine: Machine, at_ms: float | None) -> None:
        self.armed[id(machine)] = at_ms

    def now(self) -> float:
        return 1_000.0


class _Asker(Machine):
    """Sends one request at start; its reply handler raises when told to."""

    def __init__(self, name: str, explode: bool = False) -> None:
        super().__init__(name, None, [BROKER])
        self.explode = explode
        self.answers: list[Any] = []

    def start(self, now: float) -> None:
        self.send(now, 12, 4, {}, BROKER, "coordinator", self._on_reply)

    def _on_reply(self, response: Any, error: Any, now: float, _p: Any) -> None:
        if self.explode:
            raise RuntimeError("member bug")
        self.answers.append(response)

    def tick(self, now: float) -> None:
        if self.explode:
            raise RuntimeError("timer bug")
        super().tick(now)


def test_a_member_that_raises_on_its_answer_stops_alone_and_the_others_in_the_same_read_get_theirs():
    driver = _Driver()
    good, bad = _Asker("good"), _Asker("bad", explode=True)
    driver.start(good)
    driver.start(bad)
    driver.on_responses([(bad, 1, _Answer("for-bad"), 10), (good, 1, _Answer("for-good"), 10)])
    assert good.answers == [_Answer("for-good")] and not good.stopped
    assert bad.stopped
    assert [name for name, _ in driver.crashes] == ["bad"]
    stops = [r for r in driver.rows if r["kind"] == "member_stop"]
    assert [(r["member"], r["detail"]["reason"]) for r in stops] == [("bad", "crash")]
    assert id(bad) not in driver.machines  # forgotten: its connections closed, its timer disarmed


def test_a_single_answer_takes_the_same_path():
    driver = _Driver()
    bad = _Asker("bad", explode=True)
    driver.start(bad)
    driver.on_responses([(bad, 1, _Answer("for-bad"), 10)])
    assert bad.stopped and [name for name, _ in driver.crashes] == ["bad"]


def test_a_member_whose_timer_raises_is_stopped():
    driver = _Driver()
    bad = _Asker("bad", explode=True)
    driver.start(bad)
    driver.on_wakeup(bad)
    assert bad.stopped and [name for name, _ in driver.crashes] == ["bad"]


def test_broker_label_is_host_and_port_and_not_part_of_equality():
    b = Broker.parse("localhost:9093")
    assert str(b) == b.label == "localhost:9093"
    assert b == Broker("localhost", 9093) and hash(b) == hash(Broker("localhost", 9093))
    assert {b: 1}[Broker("localhost", 9093)] == 1
    copy = pickle.loads(pickle.dumps(b))
    assert copy == b and copy.label == "localhost:9093"
    assert repr(b) == "Broker(host='localhost', port=9093)"


def test_observed_rows_name_the_broker_by_its_label():
    driver = _Driver()
    asker = _Asker("a")
    driver.start(asker)
    driver.on_responses([(asker, 1, _Answer("ok"), 10)])
    rows = [r for r in driver.rows if r["kind"] in ("request", "response")]
    assert [r["broker"] for r in rows] == ["127.0.0.1:9092", "127.0.0.1:9092"]
